"""The studies: one package per study, each registered through the project's own entry points (pyproject.toml),
exactly as a plugin's study is; the cell loop they share is the library's (`evaluation.py`)."""
