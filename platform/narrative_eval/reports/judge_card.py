"""Every judge's report card: one row per judge of a sweep, gathering what the platform measured about it — its
control checks (how many passed, which failed, its weakest discrimination and its length bias, each with its
interval), its agreement with itself across repeated judging (`judge_repeats`), the difference its probability-
weighted scores make (`scoring: expected`), its failure rate — and one verdict a reader can act on.

The checks come from the sweep's check rows (stats.judge_checks.CheckRow); the rest is the mean over the sweep's
finished cells of what each logged about the judge (`judge/<id>/mean_self_alpha`, `judge/<id>/expected_qavg` beside
`judge/<id>/qavg`, `judge/<id>/failure_rate`). A number the sweep did not measure is left empty (NaN), and the
verdict says what would measure it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_checks import CheckRow
from narrative_eval.stats.judge_reliability import SELF_ALPHA

pd = lazy_module("pandas")

JUDGE_CARD_NAME = "judge_card"
"""The file stem of the table (judge_card.csv, .md, .tex)."""

JUDGE_CARD_TITLE = "Judge report card"
"""The table's title in a sweep's summary."""

SELF_AGREEMENT_FLOOR = 0.667
"""Below this alpha across repeats a judge's scores are read with care (Krippendorff's lowest level for tentative
conclusions, "Content Analysis", 2004)."""

CELL_NUMBERS = {"self_alpha": f"mean_{SELF_ALPHA}", "failure_rate": "failure_rate", "qavg": "qavg",
                "expected_qavg": "expected_qavg"}
"""What the card reads from the cells, each judge's logged name after `judge/<id>/`."""

COLUMNS = ["judge", "checks_passed", "checks", "failed_checks", "discrimination", "discrimination_lo",
           "discrimination_hi", "length_bias", "length_bias_lo", "length_bias_hi", "self_alpha",
           "expected_minus_sampled", "failure_rate", "verdict"]


def cell_numbers(experiment: str, sweep: str, data_sha256: str | None = None) -> dict[str, dict[str, float]]:
    """Judge -> the mean over the sweep's finished cells of each of CELL_NUMBERS the cells logged (NaN: none did);
    the judges are those whose failure rate a cell logged (every judge of a cell logs one)."""
    runs = tracking.sweep_cell_runs(experiment, sweep, data_sha256=data_sha256)
    judges = [parts[1] for parts in (str(column)[len("metrics."):].split("/") for column in runs.columns
                                     if str(column).startswith("metrics.judge/"))
              if len(parts) == 3 and parts[2] == "failure_rate"]
    found: dict[str, dict[str, float]] = {}
    for judge in judges:
        means = {}
        for name, logged in CELL_NUMBERS.items():
            column = f"metrics.{judge_key(judge, logged)}"
            values = pd.to_numeric(runs[column], errors="coerce").dropna() if column in runs.columns else []
            means[name] = float(values.mean()) if len(values) else math.nan
        found[judge] = means
    return found


def _weakest(rows: Sequence[CheckRow], statistic: str, worst) -> tuple[float, float, float]:
    """(value, lo, hi) of the judge's check of `statistic` that `worst` picks (NaN without one)."""
    mine = [row for row in rows if row.statistic == statistic]
    if not mine:
        return math.nan, math.nan, math.nan
    row = worst(mine, key=lambda r: r.value)
    return row.value, row.lo, row.hi


def verdict(failed: Sequence[str], n_checks: int, self_alpha: float) -> str:
    """What a reader does with the judge's scores."""
    if failed:
        return f"do not use its scores: it failed {', '.join(failed)}"
    if not n_checks:
        return "unchecked: run its control checks (judge_checks) before trusting its scores"
    if math.isnan(self_alpha):
        return "usable: it passed its checks; judge more than once (judge_repeats) to measure its own noise"
    if self_alpha < SELF_AGREEMENT_FLOOR:
        return f"usable with care: it passed its checks but agrees with itself only at alpha {self_alpha:.2f}"
    return f"usable: it passed its checks and agrees with itself at alpha {self_alpha:.2f}"


def judge_card(rows: Sequence[CheckRow], numbers: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """One row per judge (those with check rows, then those with cell numbers), in COLUMNS."""
    judges = list(dict.fromkeys([*(row.judge for row in rows), *numbers]))
    card = []
    for judge in judges:
        mine = [row for row in rows if row.judge == judge]
        failed = list(dict.fromkeys(row.check for row in mine if not row.passed))
        measured = numbers.get(judge, {})
        self_alpha = measured.get("self_alpha", math.nan)
        discrimination = _weakest(mine, "discrimination", min)
        length_bias = _weakest(mine, "length_bias", max)
        card.append({
            "judge": judge, "checks_passed": sum(row.passed for row in mine), "checks": len(mine),
            "failed_checks": ", ".join(failed), "discrimination": discrimination[0],
            "discrimination_lo": discrimination[1], "discrimination_hi": discrimination[2],
            "length_bias": length_bias[0], "length_bias_lo": length_bias[1], "length_bias_hi": length_bias[2],
            "self_alpha": self_alpha,
            "expected_minus_sampled": measured.get("expected_qavg", math.nan) - measured.get("qavg", math.nan),
            "failure_rate": measured.get("failure_rate", math.nan),
            "verdict": verdict(failed, len(mine), self_alpha)})
    return pd.DataFrame(card, columns=COLUMNS)


def write_judge_card(rows: Sequence[CheckRow], numbers: Mapping[str, Mapping[str, float]],
                     out_dir: str | Path) -> str:
    """judge_card.csv, .md and .tex in out_dir; the table as markdown."""
    return write_table(judge_card(rows, numbers), Path(out_dir), JUDGE_CARD_NAME)


__all__ = ["JUDGE_CARD_NAME", "JUDGE_CARD_TITLE", "SELF_AGREEMENT_FLOOR", "cell_numbers", "judge_card", "verdict",
           "write_judge_card"]
