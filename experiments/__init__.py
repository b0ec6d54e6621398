"""Command-line entry points: `python -m experiments.sweep` and `python -m experiments.report`."""
