"""The built-in studies: one package each (registered in `study.STUDIES`), holding everything of its own; the cell
loop they share is the library's (`evaluation.py`)."""
