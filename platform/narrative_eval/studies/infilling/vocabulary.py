"""The narrative-infilling study's words, in one place: its name, its one condition, the judge rubric and its
dimensions (read from the rubric file), the extraction statuses it counts, and its headline numbers."""

from __future__ import annotations

from narrative_eval.judges import INFILLING_RUBRIC, load_rubric

NAME = "infilling"
"""The study's registry name (and its MLflow experiment)."""

CONDITION = "standard"
"""The only condition of an infilling grid."""
DEFAULT_PROMPT_SETTING = "L2"
"""The prompt setting of a config that names none: moderate specificity (TELeR L2)."""

RUBRIC = INFILLING_RUBRIC
"""The judges' rubric unless a judge names its own."""
DIMENSIONS: tuple[str, ...] = load_rubric(RUBRIC).keys
"""The five narrative dimensions people and judges rate a fill on."""

EXTRACTED: tuple[str, ...] = ("tag", "echo")
"""Extraction statuses that count as an answer found where the prompt asked for it."""
STATUSES: tuple[str, ...] = (*EXTRACTED, "fallback", "none")
"""Every extraction status, each logged as `extraction_<status>_rate`."""

TABLE = "generations.json"
"""A cell's table: one row per instance and seed."""

AT_AVG = "at_avg"
"""The mean of the automatic metrics flagged for it (AtAvg)."""
JUDGE_HEADLINES: tuple[str, ...] = ("qavg", "high_pct")
"""Per-judge numbers shown first, as `judge/<id>/<headline>`: QAvg and High%."""
PUBLISHED_SOURCE = "published, Table 3"
"""The rows of the published reference (data/reference/) the Runs tab can show beside a sweep."""
