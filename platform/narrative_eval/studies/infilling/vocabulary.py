"""The narrative-infilling study's words, in one place: its name, its one condition, its prompt file and judge rubric
(registered from the package) and the rubric's dimensions (read from the rubric file), the extraction statuses it counts; its table, AtAvg and per-judge headline
numbers are every single-turn study's (evaluation.py)."""

from __future__ import annotations

from pathlib import Path

from narrative_eval.evaluation import AT_AVG, JUDGE_HEADLINES, TABLE
from narrative_eval.judges import load_rubric, register_rubric
from narrative_eval.prompts.render import register_prompt_file

NAME = "infilling"
"""The study's registry name (and its MLflow experiment)."""

CONDITION = "standard"
"""The only condition of an infilling grid."""
DEFAULT_PROMPT_SETTING = "L2"
"""The prompt setting of a config that names none: moderate specificity (TELeR L2)."""

PROMPT_FILE = Path(__file__).with_name("settings.yaml")
"""Its prompt settings (TELeR levels L0-L4 and the reasoning paradigms), registered by name; a config's
`prompt_file` replaces the whole file."""
SETTINGS: list[str] = register_prompt_file(PROMPT_FILE)
RUBRIC = register_rubric(Path(__file__).with_name("rubrics") / "infilling_narrative.yaml")
"""The judges' rubric unless a judge names its own."""
DIMENSIONS: tuple[str, ...] = load_rubric(RUBRIC).keys
"""The five narrative dimensions people and judges rate a fill on."""

EXTRACTED: tuple[str, ...] = ("tag", "echo")
"""Extraction statuses that count as an answer found where the prompt asked for it."""
STATUSES: tuple[str, ...] = (*EXTRACTED, "fallback", "none")
"""Every extraction status, each logged as `extraction_<status>_rate`."""

PUBLISHED_SOURCE = "published, Table 3"
"""The rows of the published reference (data/reference/) the Runs tab can show beside a sweep."""

__all__ = ["AT_AVG", "CONDITION", "DIMENSIONS", "EXTRACTED", "JUDGE_HEADLINES", "NAME", "PUBLISHED_SOURCE", "RUBRIC",
           "STATUSES", "TABLE"]
