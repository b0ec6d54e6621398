"""How far a judge's numbers can be trusted beyond its control checks: its agreement with itself across repeats, a
win rate with the length of the answers taken out, juries of judges, and how much of a gap the judge's own noise
explains. Pure functions over arrays and frames (numpy, pandas; Krippendorff's alpha through judges.agreement).

- Self-agreement (repeated judging): per dimension, Krippendorff's alpha at the interval level over items x repeats;
  for pairwise verdicts, the flip rate (the share of repeat pairs of an item whose preferred side differs).
- Length-controlled win rate (Dubois et al. 2024, arXiv 2404.04475): a logistic model of the win on
  tanh(length difference / its SD) and an intercept; the LC win rate is the predicted win probability at zero length
  difference, with a percentile interval from a bootstrap over pairs.
- Juries (Verga et al. 2024, arXiv 2404.18796): judges' scores combined by mean, median, majority or weighted, the
  weights from each member's control checks (discrimination above chance) and, where people rated the items, its
  agreement with them; returned with the weights.
- The noise table: each judge's within-output spread (SD across repeats) beside the differences between the models or
  settings it scored, and the gap its noise alone would make.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np

from narrative_eval.judges.agreement import krippendorff_alpha
from narrative_eval.judges.judge import majority_verdict
from narrative_eval.judges.rubric import Rubric
from narrative_eval.lazy import lazy_module
from narrative_eval.records import JudgeResult
from narrative_eval.stats.bootstrap import percentile_interval
from narrative_eval.stats.judge_checks import CheckRow

pd = lazy_module("pandas")

Aggregate = Literal["mean", "median", "majority", "weighted"]
"""How a jury combines its members' scores of one output."""

AGGREGATES: tuple[str, ...] = ("mean", "median", "majority", "weighted")

LC_PENALTY = 1e-4
"""L2 penalty (per pair) on the length slope of the length-controlled model: keeps the fit finite when length decides
every verdict (perfect separation), and is negligible otherwise."""


# --------------------------------------------------------------------------- self-agreement


def self_agreement(scores: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Krippendorff's alpha (interval) of one judge with itself: `scores` is items x repeats (NaN: a repeat that
    failed). 1 for a judge that repeats every score, about 0 for one that answers at random; NaN where undefined
    (every score the same)."""
    matrix = np.asarray(scores, dtype=float)
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise ValueError(f"self-agreement needs items x at least 2 repeats, got shape {matrix.shape}")
    return krippendorff_alpha(matrix.T.tolist(), "interval")


def self_agreement_by_dimension(frame: pd.DataFrame) -> dict[str, float]:
    """Per dimension, the judge's alpha across repeats: `frame` has columns item, repeat, dimension, score (one judge)."""
    found = {}
    for dimension, rows in frame.groupby("dimension", sort=False):
        found[str(dimension)] = self_agreement(rows.pivot_table(index="item", columns="repeat", values="score",
                                                                aggfunc="first").to_numpy(dtype=float))
    return found


REPEAT_MEANS = "repeat_means"
"""A generations row's column (`judge/<id>/repeat_means`) holding each repeat's mean score of the output."""

SELF_ALPHA = "self_alpha"
"""The suffix of a judge's logged agreement with itself across repeats (`<dimension>_self_alpha`, `mean_self_alpha`)."""


def _repeat_mean(scores: Mapping[str, float | None] | None) -> float:
    values = [value for value in (scores or {}).values() if value is not None]
    return float(np.mean(values)) if values else math.nan


def repeat_means(result: JudgeResult) -> list[float | None]:
    """Each repeat's mean score of one output (None: that repeat failed; a checklist's adherence), as a generations
    or conversations row keeps it (`REPEAT_MEANS`) for the noise table; empty for an output judged once."""
    return [None if scores is None else _repeat_mean(scores) for scores in result.repeats]


def repeat_agreement(results: Sequence[JudgeResult], rubric: Rubric) -> dict[str, float]:
    """A judge's agreement with itself across the repeats of `results` (one judge, one rubric, each judged the same
    number of times: `JudgeResult.repeats`): per dimension of a scores rubric `<dimension>_self_alpha`, and for any
    rubric `mean_self_alpha` over each repeat's mean score (a checklist's share of requirements met). Empty when the
    outputs were judged once."""
    repeated = [result.repeats for result in results if len(result.repeats) > 1]
    if not repeated:
        return {}
    width = max(len(repeats) for repeats in repeated)
    found = {}

    def alpha(value) -> float:
        matrix = [[value(repeats[index]) if index < len(repeats) else math.nan for index in range(width)]
                  for repeats in repeated]
        return self_agreement(matrix)

    if rubric.kind == "scores":
        for key in rubric.keys:
            found[f"{key}_{SELF_ALPHA}"] = alpha(lambda scores, key=key: math.nan if scores is None or scores.get(key)
                                                 is None else float(scores[key]))
    found[f"mean_{SELF_ALPHA}"] = alpha(_repeat_mean)
    return found


def flip_rate(verdicts: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Pairwise verdicts (items x repeats of signed preferences for A; NaN: failed): the share of an item's repeat
    pairs whose direction (A better, tie, B better) differs, averaged over the items with two valid repeats or more."""
    matrix = np.sign(np.asarray(verdicts, dtype=float))
    shares = []
    for row in matrix:
        valid = row[~np.isnan(row)]
        pairs = list(combinations(valid, 2))
        if pairs:
            shares.append(sum(a != b for a, b in pairs) / len(pairs))
    return float(np.mean(shares)) if shares else math.nan


# --------------------------------------------------------------------------- length-controlled win rate


@dataclass(frozen=True)
class WinRate:
    """A raw and a length-controlled win rate with the LC one's interval."""

    raw: float
    """Share of pairs won (ties half)."""
    lc: float
    """Predicted win probability at zero length difference."""
    lo: float
    """Lower bound of the LC win rate's bootstrap interval."""
    hi: float
    """Upper bound."""
    length_slope: float
    """The length term's coefficient (log-odds per unit of tanh(difference / SD)): how much length buys."""
    n: int
    """Pairs."""


def _balance(x: np.ndarray) -> np.ndarray:
    """Pair weights under which pairs where A is longer weigh as much as pairs where it is shorter (pairs of equal
    length weigh 1; no reweighting when one side has no pair)."""
    longer, shorter = int((x > 0).sum()), int((x < 0).sum())
    if not longer or not shorter:
        return np.ones_like(x)
    half = (longer + shorter) / 2
    return np.where(x > 0, half / longer, np.where(x < 0, half / shorter, 1.0))


def _logistic_fit(x: np.ndarray, y: np.ndarray, penalty: float = LC_PENALTY, steps: int = 100) -> np.ndarray:
    """(intercept, slope) of a logistic model of y (0..1, ties 0.5) on x by Newton's method, the pairs weighted by
    `_balance`, the slope under an L2 penalty of `penalty` times the number of pairs."""
    design = np.column_stack([np.ones_like(x), x])
    weight = _balance(x)
    ridge = np.diag([0.0, penalty * len(x)])
    beta = np.zeros(2)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(design @ beta)))
        gradient = design.T @ (weight * (y - p)) - ridge @ beta
        hessian = design.T @ (design * (weight * p * (1 - p))[:, None]) + ridge + 1e-12 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def length_controlled_win_rate(wins: Sequence[float], length_difference: Sequence[float], n_boot: int = 2000,
                               level: float = 0.95, seed: int = 0) -> WinRate:
    """The win rate of side A over pairs with the answers' length taken out (Dubois et al. 2024): `wins` are 1 (A
    won), 0.5 (tie) or 0, `length_difference` A's length minus B's (characters or tokens). The length term is
    tanh(difference / SD of the differences), as in the paper; the LC win rate is the model's win probability at
    zero difference, its interval a percentile bootstrap over pairs. The pairs where A is longer and those where it is
    shorter are weighted to weigh the same: with a well-specified model this changes nothing in expectation, and
    where length decides every verdict (the slope then unbounded, held by LC_PENALTY) it keeps the estimate at 0.5
    instead of leaning to the side that is more often longer."""
    y = np.asarray(wins, dtype=float)
    difference = np.asarray(length_difference, dtype=float)
    if y.shape != difference.shape or y.size < 2:
        raise ValueError("one win and one length difference per pair, at least two pairs")
    if np.any((y < 0) | (y > 1)):
        raise ValueError("wins must be between 0 and 1 (ties 0.5)")
    spread = float(np.std(difference))
    x = np.tanh(difference / spread) if spread > 0 else np.zeros_like(difference)
    intercept, slope = _logistic_fit(x, y)
    rng = np.random.default_rng(seed)
    replicates = []
    for _ in range(n_boot):
        pick = rng.integers(0, y.size, y.size)
        replicates.append(1 / (1 + math.exp(-_logistic_fit(x[pick], y[pick])[0])))
    lo, hi = percentile_interval(np.asarray(replicates), level)
    return WinRate(float(y.mean()), 1 / (1 + math.exp(-intercept)), lo, hi, float(slope), int(y.size))


# --------------------------------------------------------------------------- juries


def member_weights(discrimination: Mapping[str, float], human_agreement: Mapping[str, float] | None = None) -> dict[str, float]:
    """Each jury member's weight, summing to 1: how far its control checks' discrimination is above chance
    (2 x (share - 0.5), 0 at or below chance), times its agreement with people (a correlation, 0 at or below 0) where
    ratings exist. ValueError when no member is above chance: such a jury has nobody to listen to."""
    raw = {}
    for judge, share in discrimination.items():
        weight = max(0.0, 2 * (float(share) - 0.5)) if math.isfinite(share) else 0.0
        if human_agreement is not None and judge in human_agreement:
            agreement = float(human_agreement[judge])
            weight *= max(0.0, agreement) if math.isfinite(agreement) else 0.0
        raw[judge] = weight
    total = sum(raw.values())
    if total <= 0:
        agrees = " and agrees with people" if human_agreement else ""
        raise ValueError(f"no jury member discriminates above chance on its control items{agrees} "
                         f"({dict(discrimination)})")
    return {judge: weight / total for judge, weight in raw.items()}


JURY_WEIGHTS_ARTIFACT = "juries/weights.json"
"""The sweep's parent run's record of each weighted jury's weights (`jury_weights`), which its report reads."""


def jury_weights(jury: str, members: Sequence[str], rows: Sequence[CheckRow]) -> dict[str, Any]:
    """A weighted jury's weights from its members' control checks (`rows`: the sweep's check rows): each member's
    discrimination, the mean over its discrimination checks (NaN without one: weight 0), through `member_weights`.
    {jury, members, discrimination, weights, error}: weights None and the reason in error when no member
    discriminates above chance."""
    discrimination = {}
    for member in members:
        values = [row.value for row in rows if row.judge == member and row.statistic == "discrimination"
                  and math.isfinite(row.value)]
        discrimination[member] = float(np.mean(values)) if values else math.nan
    try:
        weights, error = member_weights(discrimination), ""
    except ValueError as problem:
        weights, error = None, str(problem)
    return {"jury": jury, "members": list(members), "discrimination": discrimination, "weights": weights,
            "error": error}


def jury_scores(scores: pd.DataFrame, aggregate: Aggregate, weights: Mapping[str, float] | None = None
                ) -> tuple[pd.Series, dict[str, float]]:
    """The jury's score of each output (`scores`: outputs x member judges, NaN where a member failed) and the weights
    it used (equal for mean, median and majority; `weights` for weighted, renormalised over the members that scored
    each output)."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"unknown jury aggregate {aggregate!r} (one of {', '.join(AGGREGATES)})")
    members = list(scores.columns)
    matrix = scores.to_numpy(dtype=float)
    if aggregate != "weighted":
        used = {member: 1 / len(members) for member in members}
        if aggregate == "mean":
            combined = np.nanmean(matrix, axis=1)
        elif aggregate == "median":
            combined = np.nanmedian(matrix, axis=1)
        else:
            # The one majority rule (judges.judge), so a table's jury reads as a sweep's does.
            combined = np.array([majority_verdict(given.tolist()) if (given := row[~np.isnan(row)]).size else math.nan
                                 for row in matrix])
        return pd.Series(combined, index=scores.index, name=aggregate), used
    if weights is None or set(members) - set(weights):
        raise ValueError(f"a weighted jury needs a weight for every member ({members})")
    vector = np.array([float(weights[m]) for m in members])
    present = ~np.isnan(matrix)
    mass = present @ vector
    combined = np.where(mass > 0, np.nansum(np.nan_to_num(matrix) * vector, axis=1) / np.where(mass > 0, mass, 1), np.nan)
    return pd.Series(combined, index=scores.index, name=aggregate), {m: float(weights[m]) for m in members}


# --------------------------------------------------------------------------- the noise table


NOISE_COLUMNS: tuple[str, ...] = ("judge", "n_outputs", "repeats", "within_sd", "noise_gap", "groups", "min_gap",
                                  "max_gap", "gaps_within_noise")
"""The columns of the table of how much of a gap a judge's noise explains."""


def noise_table(frame: pd.DataFrame, z: float = 1.96) -> pd.DataFrame:
    """Per judge, its within-output spread beside the differences between the groups (models, settings) it scored.

    `frame` has columns judge, group, output, repeat, score (one row per judgment of an output; an output belongs to
    one group). within_sd: the pooled SD of an output's scores across repeats; noise_gap: the gap between two group
    means that the judge's noise alone reaches one time in twenty (z x within_sd x sqrt(2 / (outputs per group x
    repeats))); min_gap, max_gap: the smallest and largest difference between two groups' mean scores;
    gaps_within_noise: the share of group pairs whose difference is below noise_gap (not a finding on this judge)."""
    rows = []
    for judge, mine in frame.groupby("judge", sort=False):
        per_output = mine.groupby("output")["score"]
        variances, counts = per_output.var(ddof=1), per_output.count()
        usable = counts > 1
        dof = float((counts[usable] - 1).sum())
        within_sd = math.sqrt(float((variances[usable] * (counts[usable] - 1)).sum()) / dof) if dof else math.nan
        means = mine.groupby(["group", "output"])["score"].mean().groupby("group").mean()
        gaps = [abs(a - b) for a, b in combinations(means.to_numpy(dtype=float), 2)]
        outputs_per_group = mine.groupby("group")["output"].nunique().mean()
        repeats = float(counts.mean())
        noise_gap = z * within_sd * math.sqrt(2 / (outputs_per_group * repeats)) if math.isfinite(within_sd) else math.nan
        rows.append({"judge": judge, "n_outputs": int(mine["output"].nunique()), "repeats": repeats,
                     "within_sd": within_sd, "noise_gap": noise_gap, "groups": int(means.size),
                     "min_gap": min(gaps) if gaps else math.nan, "max_gap": max(gaps) if gaps else math.nan,
                     "gaps_within_noise": float(np.mean([g < noise_gap for g in gaps])) if gaps else math.nan})
    return pd.DataFrame(rows, columns=list(NOISE_COLUMNS))


__all__ = [
    "AGGREGATES",
    "JURY_WEIGHTS_ARTIFACT",
    "NOISE_COLUMNS",
    "REPEAT_MEANS",
    "SELF_ALPHA",
    "WinRate",
    "flip_rate",
    "jury_scores",
    "jury_weights",
    "length_controlled_win_rate",
    "member_weights",
    "noise_table",
    "repeat_agreement",
    "repeat_means",
    "self_agreement",
    "self_agreement_by_dimension",
]
