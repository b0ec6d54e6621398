"""Every judge's report card: one row per judge of a sweep, gathering what the platform measured about it — its
control checks (how many passed, which failed, its weakest discrimination and its length bias, each with its
interval), its agreement with itself across repeated judging (`judge_repeats`), the difference its probability-
weighted scores make (`scoring: expected`), its failure rate, its agreement with the people who rated the sweep's
outputs (`human_rho`, where they did) — and one verdict a reader can act on.

The checks come from the sweep's check rows (stats.judge_checks.CheckRow); the rest is the mean over the sweep's
finished cells of what each logged about the judge (`judge/<id>/mean_self_alpha`, `judge/<id>/expected_qavg` beside
`judge/<id>/qavg`, `judge/<id>/failure_rate`), and its agreement with people the report's (reports.human_ratings.
human_rho, passed in with those numbers). A number the sweep did not measure is left empty (NaN), and the verdict
says what would measure it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_checks import CheckRow
from narrative_eval.stats.judge_reliability import REPEAT_MEANS, SELF_ALPHA, noise_table

pd = lazy_module("pandas")

JUDGE_CARD_NAME = "judge_card"
"""The file stem of the table (judge_card.csv, .md, .tex)."""

JUDGE_CARD_TITLE = "Judge report card"
"""The table's title in a sweep's summary."""

JUDGE_NOISE_NAME = "judge_noise"
"""The file stem of the table of how much of a gap each judge's own noise explains."""

JUDGE_NOISE_TITLE = "How much of a gap each judge's noise explains"

SELF_AGREEMENT_FLOOR = 0.667
"""Below this alpha across repeats a judge's scores are read with care (Krippendorff's lowest level for tentative
conclusions, "Content Analysis", 2004)."""

CELL_NUMBERS = {"self_alpha": f"mean_{SELF_ALPHA}", "failure_rate": "failure_rate", "qavg": "qavg",
                "expected_qavg": "expected_qavg"}
"""What the card reads from the cells, each judge's logged name after `judge/<id>/`."""

COLUMNS = ["judge", "checks_passed", "checks", "failed_checks", "discrimination", "discrimination_lo",
           "discrimination_hi", "length_bias", "length_bias_lo", "length_bias_hi", "self_alpha",
           "expected_minus_sampled", "noise_gap", "failure_rate", "human_rho", "verdict"]


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


def repeat_frame(rows: pd.DataFrame, id_column: str, groups: Sequence[str] = ("model", "setting")) -> pd.DataFrame:
    """judge, group, output, repeat, score: each repeat's mean score of each output, from a report's generations rows
    (one per item and seed, with `groups` columns and each repeating judge's `judge/<id>/repeat_means`); empty when no
    judge repeated."""
    frames = []
    for column in [c for c in rows.columns if str(c).startswith("judge/") and str(c).endswith(f"/{REPEAT_MEANS}")]:
        judge = str(column).split("/")[1]
        for _, row in rows[rows[column].notna()].iterrows():
            group = " · ".join(str(row[name]) for name in groups if name in rows.columns)
            output = f"{group}/{row[id_column]}/{row.get('seed', '')}"
            frames += [{"judge": judge, "group": group, "output": output, "repeat": repeat, "score": float(score)}
                       for repeat, score in enumerate(_repeats(row[column]))
                       if score is not None and math.isfinite(float(score))]
    return pd.DataFrame(frames, columns=["judge", "group", "output", "repeat", "score"])


def _repeats(value: Any) -> list[float | None]:
    """A row's repeat means: a list, or the JSON text of one (a logged table keeps a list cell as its text)."""
    return json.loads(value) if isinstance(value, str) else list(value)


def noise_gaps(noise: pd.DataFrame) -> dict[str, float]:
    """Judge -> the gap between two groups' means its noise alone reaches one time in twenty (noise_table's)."""
    return {str(row.judge): float(row.noise_gap) for row in noise.itertuples()} if not noise.empty else {}


def write_judge_noise(rows: pd.DataFrame, id_column: str, out_dir: str | Path) -> tuple[str, dict[str, float]]:
    """judge_noise.csv (stats.judge_reliability.noise_table over the repeats of the rows) in out_dir: its markdown
    ('' when no judge repeated) and each judge's noise gap, for its report card."""
    frame = repeat_frame(rows, id_column)
    if frame.empty:
        return "", {}
    noise = noise_table(frame)
    return write_table(noise, Path(out_dir), JUDGE_NOISE_NAME), noise_gaps(noise)


def judge_numbers(experiment: str, sweep: str, data_sha256: str | None, out_dir: str | Path,
                  rows: pd.DataFrame | None = None, id_column: str = "") -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """What a report knows of its judges beyond their checks: the noise table (title -> markdown; none unless the
    generations `rows` show repeated judging) and, per judge, the numbers its report card reads (`cell_numbers`,
    with its noise gap)."""
    numbers = cell_numbers(experiment, sweep, data_sha256)
    noise, gaps = write_judge_noise(rows, id_column, out_dir) if rows is not None else ("", {})
    for judge, gap in gaps.items():
        numbers.setdefault(judge, {})["noise_gap"] = gap
    return ({JUDGE_NOISE_TITLE: noise} if noise else {}), numbers


def _weakest(rows: Sequence[CheckRow], statistic: str, worst) -> tuple[float, float, float]:
    """(value, lo, hi) of the judge's check of `statistic` that `worst` picks (NaN without one)."""
    mine = [row for row in rows if row.statistic == statistic]
    if not mine:
        return math.nan, math.nan, math.nan
    row = worst(mine, key=lambda r: r.value)
    return row.value, row.lo, row.hi


def verdict(failed: Sequence[str], n_checks: int, self_alpha: float, noise_gap: float = math.nan) -> str:
    """What a reader does with the judge's scores."""
    if failed:
        return f"do not use its scores: it failed {', '.join(failed)}"
    if not n_checks:
        return "unchecked: run its control checks (judge_checks) before trusting its scores"
    if math.isnan(self_alpha):
        return "usable: it passed its checks; judge more than once (judge_repeats) to measure its own noise"
    noise = f"; its own noise explains gaps under {noise_gap:.2f} points" if math.isfinite(noise_gap) else ""
    if self_alpha < SELF_AGREEMENT_FLOOR:
        return f"usable with care: it passed its checks but agrees with itself only at alpha {self_alpha:.2f}{noise}"
    return f"usable: it passed its checks and agrees with itself at alpha {self_alpha:.2f}{noise}"


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
            "noise_gap": measured.get("noise_gap", math.nan),
            "failure_rate": measured.get("failure_rate", math.nan),
            "human_rho": measured.get("human_rho", math.nan),
            "verdict": verdict(failed, len(mine), self_alpha, measured.get("noise_gap", math.nan))})
    return pd.DataFrame(card, columns=COLUMNS)


def write_judge_card(rows: Sequence[CheckRow], numbers: Mapping[str, Mapping[str, float]],
                     out_dir: str | Path) -> str:
    """judge_card.csv, .md and .tex in out_dir; the table as markdown."""
    return write_table(judge_card(rows, numbers), Path(out_dir), JUDGE_CARD_NAME)


__all__ = ["JUDGE_CARD_NAME", "JUDGE_CARD_TITLE", "JUDGE_NOISE_NAME", "JUDGE_NOISE_TITLE", "SELF_AGREEMENT_FLOOR",
           "cell_numbers", "judge_card", "judge_numbers", "noise_gaps", "repeat_frame", "verdict", "write_judge_card",
           "write_judge_noise"]
