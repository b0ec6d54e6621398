"""The studies: one package per study, each registered through the project's own entry points (pyproject.toml),
exactly as a plugin's study is; the cell loops they run on are the library's (`evaluation.py` for one prompt per
item, `multi_turn.py` for conversations)."""
