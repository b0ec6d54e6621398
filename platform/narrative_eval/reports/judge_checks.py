"""The judge control checks' table: judge_checks.csv (and .md, .tex) in a sweep's report folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_checks import CheckRow, judge_checks_table

JUDGE_CHECKS_NAME = "judge_checks"
"""The file stem of the table (columns: stats.judge_checks.COLUMNS, docs/formats.md)."""

JUDGE_CHECKS_TITLE = "Judge control checks"
"""The table's title in a sweep's summary."""


def write_judge_checks(rows: Sequence[CheckRow], out_dir: str | Path) -> str:
    """Every judge's check rows as judge_checks.csv, .md and .tex in out_dir; returns the markdown."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_table(judge_checks_table(rows), out_dir, JUDGE_CHECKS_NAME)


def failed_checks(rows: Sequence[CheckRow]) -> list[str]:
    """One line per failed check, for a sweep to print: 'judge rubric/check: statistic value (note)'."""
    return [f"{row.judge} {row.rubric}/{row.check}: {row.statistic} {row.value:.3f} ({row.note})"
            for row in rows if not row.passed]


__all__ = ["JUDGE_CHECKS_NAME", "JUDGE_CHECKS_TITLE", "failed_checks", "write_judge_checks"]
