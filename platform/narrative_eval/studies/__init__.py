"""The studies: one package per study, each registered through the project's own entry points (pyproject.toml),
exactly as a plugin's study is; their shared cell plumbing (`base.py`)."""
