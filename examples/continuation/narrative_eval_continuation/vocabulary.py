"""The continuation study's words in one place: its name, its prompt and rubric files, its cell table, AtAvg."""

from __future__ import annotations

from pathlib import Path

from narrative_eval.judges import register_rubric

NAME = "continuation"
"""The study's registry name (and its MLflow experiment)."""
PROMPTS = Path(__file__).with_name("prompts.yaml")
"""Its prompt settings (`plain`, `guided`), in the platform's prompt-file format."""
RUBRIC = register_rubric(Path(__file__).with_name("continuation_quality.yaml"))
"""The judges' rubric unless a judge names its own; registered, so `--list` shows it and any study may use it."""
TABLE = "generations.json"
"""A cell's table: one row per passage and seed."""
AT_AVG = "at_avg"
"""The mean of the automatic metrics flagged for it (AtAvg)."""

