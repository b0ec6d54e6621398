"""The order people rate a sweep's outputs in, where the ratings count (stats.rate_next), and the intervals they make.

Each output's uncertainty comes from the judges' scores captured with it: with two judges or more, how far their
mean scores of it lie apart (the SD across judges; a sweep that judges repeatedly lists each repeat as a judge of
its own, so this is also the spread across repeated judging); with one judge, how far apart its own scores of the
output's dimensions lie (the SD over dimensions: a fill it calls fluent but incoherent is one it is less sure of).
Within each cell (model x prompt setting) the outputs are cut into strata by that uncertainty and ordered by the
stratified design of stats.rate_next, with a budget of BUDGET_SHARE of the cell's outputs; the cells' orders are
interleaved the same way, so every cell gets its share of any number of ratings. The order is seeded by the sweep's
name: every rater of a sweep follows the same one, and each rating keeps its design (`Rating.design`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records import stable_hash
from narrative_eval.stats.ppi import StratifiedMean, stratified_mean
from narrative_eval.stats.rate_next import STRATA, rate_next_order, uncertainty_strata

pd = lazy_module("pandas")

BUDGET_SHARE = 0.25
"""The share of a cell's outputs the design plans ratings for (at least one per stratum)."""

ORDER = "rate-next"
"""The name a rating's design gives its order."""


def judge_uncertainty(judge_scores: Mapping[str, Mapping[str, float | None]]) -> float:
    """An output's uncertainty from its judges' scores (judge -> dimension -> score); NaN when no judge scored it."""
    means = []
    spread = math.nan
    for scores in judge_scores.values():
        values = [float(v) for v in scores.values() if v is not None and math.isfinite(float(v))]
        if values:
            means.append(float(np.mean(values)))
            spread = float(np.std(values, ddof=1)) if len(values) >= 2 else 0.0
    if len(means) >= 2:
        return float(np.std(means, ddof=1))
    return spread if means else math.nan


def sweep_seed(sweep: str) -> int:
    """The seed of a sweep's order: the same for every rater and every page load."""
    return int(stable_hash(["rate-next", sweep], 8), 16)


def rate_next_plan(cells: Sequence[Hashable], uncertainty: Sequence[float], seed: int,
                   budget_share: float = BUDGET_SHARE, strata: int = STRATA) -> pd.DataFrame:
    """The order to rate outputs in: one row per output (`index` into the inputs), first to rate first, with its
    cell, stratum, probability (of being rated within its cell's budget) and weight (its inverse)."""
    values = np.asarray(uncertainty, dtype=float)
    keys = list(cells)
    frames = []
    for number, cell in enumerate(dict.fromkeys(keys)):
        members = np.array([i for i, key in enumerate(keys) if key == cell])
        budget = max(strata, math.ceil(budget_share * members.size))
        order = rate_next_order(values[members], budget, seed + number, strata)
        frames.append(pd.DataFrame({
            "index": members[order["position"].to_numpy()], "cell": [cell] * len(order),
            "stratum": order["stratum"].to_numpy(), "probability": order["probability"].to_numpy(),
            "weight": 1.0 / order["probability"].to_numpy(), "key": (np.arange(len(order)) + 0.5) / budget}))
    if not frames:
        return pd.DataFrame(columns=["index", "cell", "stratum", "probability", "weight"])
    return (pd.concat(frames, ignore_index=True).sort_values("key", kind="stable").drop(columns="key")
            .reset_index(drop=True))


def design_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a rating keeps of its output's place in the order (a row of rate_next_plan)."""
    return {"order": ORDER, "cell": list(row["cell"]) if isinstance(row["cell"], tuple) else row["cell"],
            "stratum": int(row["stratum"]), "probability": float(row["probability"]), "weight": float(row["weight"])}


def cell_intervals(cells: Sequence[Hashable], uncertainty: Sequence[float], judge: Sequence[float],
                   human: Sequence[float], strata: int = STRATA) -> list[tuple[Hashable, StratifiedMean]]:
    """Each cell's stratified PPI++ estimate of its mean human rating: its outputs in the strata the order used (the
    same uncertainty cut the same way), the judge's score and the mean human rating of each (NaN: not rated)."""
    values, f, y = (np.asarray(a, dtype=float) for a in (uncertainty, judge, human))
    keys = list(cells)
    found = []
    for cell in dict.fromkeys(keys):
        members = np.array([i for i, key in enumerate(keys) if key == cell])
        found.append((cell, stratified_mean(f[members], y[members], uncertainty_strata(values[members], strata))))
    return found


__all__ = ["BUDGET_SHARE", "ORDER", "cell_intervals", "design_of", "judge_uncertainty", "rate_next_plan", "sweep_seed"]
