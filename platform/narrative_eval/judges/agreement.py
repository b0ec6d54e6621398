"""Agreement between judges, and between judges and humans or metrics.

Pairwise statistics (kappa, MAE, exact agreement, Spearman) drop pairs where either side
is missing (None or NaN). Krippendorff's alpha takes a raters x units matrix with gaps and
is implemented here from its coincidence-matrix definition (Krippendorff, "Computing
Krippendorff's Alpha-Reliability", 2011).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Level = Literal["nominal", "ordinal", "interval", "ratio"]


@dataclass(frozen=True)
class CorrelationCI:
    """A correlation with its bootstrap confidence interval."""

    estimate: float
    """The correlation on the full sample."""
    low: float
    """Lower percentile bound of the bootstrap interval."""
    high: float
    """Upper percentile bound of the bootstrap interval."""
    n: int
    """Number of complete pairs used."""


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def paired(a: Sequence, b: Sequence) -> tuple[list, list]:
    """The pairs where both sides are present."""
    if len(a) != len(b):
        raise ValueError(f"paired ratings differ in length: {len(a)} vs {len(b)}")
    kept = [(x, y) for x, y in zip(a, b) if not _missing(x) and not _missing(y)]
    return [x for x, _ in kept], [y for _, y in kept]


def mae(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean absolute difference over complete pairs (NaN when there are none)."""
    x, y = paired(a, b)
    if not x:
        return math.nan
    return float(np.mean(np.abs(np.asarray(x, float) - np.asarray(y, float))))


def exact_agreement(a: Sequence, b: Sequence) -> float:
    """Share of complete pairs with identical ratings (NaN when there are none)."""
    x, y = paired(a, b)
    if not x:
        return math.nan
    return sum(p == q for p, q in zip(x, y)) / len(x)


def cohen_kappa(
    a: Sequence,
    b: Sequence,
    *,
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence | None = None,
) -> float:
    """Cohen's kappa between two raters; weighted variants treat `labels` (default: sorted
    observed values) as ordered categories at equal spacing. NaN when chance agreement is total."""
    x, y = paired(a, b)
    if not x:
        return math.nan
    categories = list(labels) if labels is not None else sorted(set(x) | set(y))
    index = {c: i for i, c in enumerate(categories)}
    unknown = [v for v in set(x) | set(y) if v not in index]
    if unknown:
        raise ValueError(f"ratings outside the given labels: {unknown}")
    k = len(categories)
    observed = np.zeros((k, k))
    for p, q in zip(x, y):
        observed[index[p], index[q]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    if weights is None:
        disagreement = (grid > 0).astype(float)
    elif weights == "linear":
        disagreement = grid
    elif weights == "quadratic":
        disagreement = grid**2
    else:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    chance = float((disagreement * expected).sum())
    if chance == 0:
        return math.nan
    return 1.0 - float((disagreement * observed).sum()) / chance


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (x * y).sum(axis=-1) / denominator, np.nan)


def spearman(a: Sequence[float], b: Sequence[float], *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> CorrelationCI:
    """Spearman's rho (ties get average ranks) with a percentile bootstrap interval over pairs.

    Resamples in which either side is constant have no rho and are skipped.
    """
    x, y = paired(a, b)
    n = len(x)
    if n < 3:
        return CorrelationCI(math.nan, math.nan, math.nan, n)
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    estimate = float(_rowwise_pearson(stats.rankdata(xs), stats.rankdata(ys)))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(n_boot, n))
    boot = _rowwise_pearson(stats.rankdata(xs[picks], axis=1), stats.rankdata(ys[picks], axis=1))
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return CorrelationCI(estimate, math.nan, math.nan, n)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return CorrelationCI(estimate, float(low), float(high), n)


def kendall_tau_systems(metric_by_system: Mapping[str, float], judge_by_system: Mapping[str, float]) -> float:
    """System-level Kendall tau-b between a metric and a judge dimension, given per-system means.

    Systems present in only one mapping (or with a missing value) are left out.
    """
    systems = [
        s
        for s in metric_by_system
        if s in judge_by_system and not _missing(metric_by_system[s]) and not _missing(judge_by_system[s])
    ]
    if len(systems) < 2:
        raise ValueError("Kendall tau needs at least two systems scored by both")
    result = stats.kendalltau([metric_by_system[s] for s in systems], [judge_by_system[s] for s in systems])
    return float(result.statistic)


def _delta_squared(values: np.ndarray, totals: np.ndarray, level: Level) -> np.ndarray:
    """Squared difference function between every pair of values."""
    if level == "nominal":
        return (values[:, None] != values[None, :]).astype(float)
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
    if level == "ratio":
        sums = np.add.outer(values, values)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(sums != 0, np.subtract.outer(values, values) / sums, 0.0)
        return ratio**2
    if level == "ordinal":
        # Distance between ranks c < k: values passed on the way, half of each end counted.
        cumulative = np.concatenate([[0.0], np.cumsum(totals)])
        low = np.minimum.outer(np.arange(len(values)), np.arange(len(values)))
        high = np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
        between = cumulative[high + 1] - cumulative[low]
        distance = between - (totals[low] + totals[high]) / 2
        return np.where(low == high, 0.0, distance**2)
    raise ValueError(f"level must be nominal, ordinal, interval or ratio, not {level!r}")


def krippendorff_alpha(reliability_data: Sequence[Sequence[float | None]], level: Level = "ordinal") -> float:
    """Krippendorff's alpha for several raters (rows) over units (columns), gaps as None/NaN.

    alpha = 1 - (n - 1) * sum(o_ck * d2_ck) / sum(n_c * n_k * d2_ck), with o the value
    coincidence matrix over pairable units (two or more ratings) and d2 the level's squared
    distance. NaN when the data show no variation at all (expected disagreement is zero).
    """
    matrix = np.array([[np.nan if _missing(v) else float(v) for v in row] for row in reliability_data], dtype=float)
    if matrix.ndim != 2:
        raise ValueError("reliability data must be a raters x units matrix")
    values = np.unique(matrix[~np.isnan(matrix)])
    if values.size == 0:
        return math.nan
    position = {v: i for i, v in enumerate(values)}
    coincidence = np.zeros((values.size, values.size))
    for unit in matrix.T:
        present = unit[~np.isnan(unit)]
        if present.size < 2:
            continue
        counts = np.zeros(values.size)
        for v in present:
            counts[position[v]] += 1
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (present.size - 1)
    totals = coincidence.sum(axis=1)
    n = totals.sum()
    if n <= 1:
        return math.nan
    d2 = _delta_squared(values, totals, level)
    expected = float((np.outer(totals, totals) * d2).sum())
    if expected == 0:
        return math.nan
    return 1.0 - (n - 1) * float((coincidence * d2).sum()) / expected


def ratings_matrix(panel: Mapping[str, Sequence], dimension: str) -> tuple[list[str], list[list[float | None]]]:
    """Raters x units matrix of one dimension from {rater: [JudgeResult or scores mapping, one per unit]}.

    Failed judgments and N/A scores become gaps, ready for krippendorff_alpha.
    """
    raters = list(panel)
    lengths = {len(panel[r]) for r in raters}
    if len(lengths) > 1:
        raise ValueError(f"raters judged different numbers of units: { {r: len(panel[r]) for r in raters} }")
    rows = []
    for rater in raters:
        row = []
        for entry in panel[rater]:
            if entry is None or (hasattr(entry, "ok") and not entry.ok):
                row.append(None)
                continue
            scores = entry.scores if hasattr(entry, "scores") else entry
            row.append(scores.get(dimension))
        rows.append(row)
    return raters, rows


__all__ = [
    "CorrelationCI",
    "cohen_kappa",
    "exact_agreement",
    "kendall_tau_systems",
    "krippendorff_alpha",
    "mae",
    "paired",
    "ratings_matrix",
    "spearman",
]
