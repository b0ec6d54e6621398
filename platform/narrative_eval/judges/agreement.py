"""Agreement between judges, and between judges and humans or metrics.

Pairwise statistics (kappa, MAE, exact agreement, Spearman) drop pairs where either side
is missing (None or NaN). Krippendorff's alpha takes a raters x units matrix with gaps. Both
kappa (scikit-learn) and alpha (the `krippendorff` package) come from maintained libraries;
this module keeps one calling convention for them: gaps as None or NaN, and NaN, not an
exception or a warning, where the statistic is undefined.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from narrative_eval.lazy import lazy_module

krippendorff = lazy_module("krippendorff")
stats = lazy_module("scipy.stats")

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
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    x, y = paired(a, b)
    # Imported on first use: scikit-learn's metrics take seconds to import, and the reports and the app import this
    # module whether or not they compute a kappa.
    from sklearn.metrics import cohen_kappa_score

    observed = set(x) | set(y)
    if labels is not None:
        # scikit-learn would silently drop ratings outside `labels`; they are a mistake here.
        unknown = [v for v in observed if v not in set(labels)]
        if unknown:
            raise ValueError(f"ratings outside the given labels: {unknown}")
    # One category used by both raters: chance agreement is total and kappa undefined (scikit-learn warns).
    if len(observed) < 2:
        return math.nan
    return float(cohen_kappa_score(x, y, labels=None if labels is None else list(labels), weights=weights))


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


LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")
"""Krippendorff's levels of measurement."""


def krippendorff_alpha(reliability_data: Sequence[Sequence[float | None]], level: Level = "ordinal") -> float:
    """Krippendorff's alpha for several raters (rows) over units (columns), gaps as None/NaN.

    NaN when no unit is rated twice or the pairable ratings show no variation at all (expected
    disagreement is zero), where the `krippendorff` package raises or divides by zero.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, not {level!r}")
    matrix = np.array([[np.nan if _missing(v) else float(v) for v in row] for row in reliability_data], dtype=float)
    if matrix.ndim != 2:
        raise ValueError("reliability data must be a raters x units matrix")
    ratings_per_unit = (~np.isnan(matrix)).sum(axis=0)
    pairable = matrix[:, ratings_per_unit >= 2]
    if np.unique(pairable[~np.isnan(pairable)]).size < 2:
        return math.nan
    # Distinct values can still be at distance zero (ratio level: v and -v); the package then divides 0 by 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
    return alpha if math.isfinite(alpha) else math.nan


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
