"""The studies: one module per study (registered in `study.STUDIES`), their shared cell plumbing (`base.py`) and
the incremental-delivery study's end-of-sweep pairwise judges (`pairwise.py`)."""
