"""The incremental-delivery study's words, in one place: its name, its delivery conditions, the two presentation
orders of a pairwise case and the sides a response is shown on, the verdict levels, and the dimensions of its
rubrics (read from the rubric files, never copied)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narrative_eval.judges import load_rubric, register_rubric

NAME = "incremental-delivery"
"""The study's registry name (and its MLflow experiment)."""
ID_COLUMN = "story_id"
"""What names a task in the study's rows (its cells' conversations tables, its score records)."""
ALIASES: tuple[str, ...] = ("incremental", "creative", "creative-integrity")
"""Other names for it in configs and on command lines."""

FULL = "full"
"""The whole brief in one user turn: the reference every other condition is compared with."""
SHARDED = "sharded"
"""One user turn per shard, every reply kept in the history."""
RECAP = "recap"
"""Sharded, then one more turn restating every shard."""
SNOWBALL = "snowball"
"""Like sharded, each turn repeating every earlier shard."""
REFERENCE = FULL
"""The condition paired effects and ICIR compare the others with."""
COMPARISON = SHARDED
"""The condition the report compares with the reference by default."""
PAIR_CONDITIONS: tuple[str, str] = (FULL, SHARDED)
"""The two conditions of a pairwise case, in its primary order (FULL shown as A)."""

PRIMARY = "primary"
"""The case as stored: FULL shown as A."""
REVERSED = "reversed"
"""The case shown swapped: SHARDED as A."""
ORDERS: tuple[str, ...] = (PRIMARY, REVERSED)
"""Presentation orders of a pairwise case."""
SIDES: tuple[str, ...] = ("A", "B")
"""Where a response was shown in one presentation order."""

LEVELS: tuple[str, ...] = ("A clearly better", "A slightly better", "Tie", "B slightly better", "B clearly better")
"""The five pairwise verdict levels, from most A-favouring to most B-favouring."""
LEVEL_SCORE: dict[str, int] = dict(zip(LEVELS, (2, 1, 0, -1, -2), strict=True))
"""A verdict as a score of A over B."""
SCORE_LEVEL: dict[int, str] = {score: level for level, score in LEVEL_SCORE.items()}
"""A score of A over B (+2 ... -2) as its verdict level."""

RUBRICS_FOLDER = Path(__file__).with_name("rubrics")
"""Its rubric files, each registered under its file name."""
CHECKLIST_RUBRIC = register_rubric(RUBRICS_FOLDER / "creative_checklist.yaml")
"""The requirement checklist every panel judge runs on a final story (adherence)."""
QUALITY_RUBRIC = register_rubric(RUBRICS_FOLDER / "creative_quality.yaml")
"""The writing-quality rubric a judge runs on a final story unless it names its own."""
PAIRWISE_RUBRIC = register_rubric(RUBRICS_FOLDER / "pairwise.yaml")
"""The pairwise rubric of the end-of-sweep judges (FULL against SHARDED)."""
PAIRWISE_EVIDENCE_RUBRIC = register_rubric(RUBRICS_FOLDER / "pairwise_evidence.yaml")
"""The pairwise rubric whose answers quote their evidence first."""
QUALITY_FIELDS: tuple[str, ...] = load_rubric(QUALITY_RUBRIC).keys
"""Quality dimensions of a record: those of the quality rubric file."""
PAIRWISE_DIMENSIONS: tuple[str, ...] = load_rubric(PAIRWISE_RUBRIC).keys
"""The two questions of a pairwise verdict: the pairwise rubric's dimensions."""
SCORE_DIMENSIONS: tuple[str, ...] = ("adherence", *QUALITY_FIELDS, "ci")
"""Per-judge numbers a cell logs as `judge/<id>/<dimension>`: checklist adherence, the quality rubric's
dimensions (score_records reads them from the rubric file) and ci (Creative Integrity)."""
HEADLINES: tuple[str, ...] = ("ci", "adherence")
"""Per-judge numbers shown first (Runs tab, run descriptions), as `judge/<id>/<headline>`."""
CHECKLIST, QUALITY = "checklist", "quality"
"""What every panel judge scores a final story by: its requirement checklist (CHECKLIST_RUBRIC) and its writing
quality (QUALITY_RUBRIC, or the judge's own rubric); a cell logs each one's failures as
`judge/<id>/<scorer>_failure_rate` and its verdicts under that name in judgments.json."""
SCORERS: tuple[str, str] = (CHECKLIST, QUALITY)


def shown_order(order_of_outputs: Sequence[int]) -> str:
    """The presentation order of a pair whose outputs were shown in `order_of_outputs` (0 = the FULL one)."""
    return PRIMARY if tuple(order_of_outputs)[0] == 0 else REVERSED


def shown_as(order: str, record_a: str, record_b: str) -> dict[str, str]:
    """Side -> the record shown there in `order`, for a case whose primary order shows record_a as A."""
    first, second = (record_a, record_b) if order == PRIMARY else (record_b, record_a)
    return dict(zip(SIDES, (first, second), strict=True))
