"""Human-anchored means: the prediction-powered estimate of a cell's mean human rating.

A judge scores every output of a cell; people rate a subset. The judge's mean over all outputs is precise but
carries the judge's bias; the people's mean over the subset is unbiased but rests on few outputs. Prediction-
powered inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference",
Science 382, 2023; applied to LLM judges by Boyeau, Angelopoulos, Yosef, Malik and Jordan, "AutoEval Done Right:
Using Synthetic Data for Model Evaluation", 2024) corrects the first with the second:

    ppi = mean(f over all N outputs) + mean(y - f over the n rated outputs)

with f the judge's score and y the mean human rating of an output. It is unbiased for the mean human rating
whatever the judge's bias, and its interval is narrower than the human-only one when the judge tracks people.

The papers' unlabeled set is disjoint from the labeled one; here the judge mean runs over every output, rated
ones included (the judge scored them all), so the two terms covary. Their linearisation, per output
psi_i = (f_i - mean f) / N + [rated] (d_i - mean d) / n with d = y - f, gives

    var(ppi) = var(f) / N + var(d) / n + 2 cov(f, d) / N

(the papers' two terms, plus the overlap's covariance over the rated outputs), which is exactly the human-only
variance when every output is rated. Outputs are not independent when they share a passage or a story, so the
sums run over clusters (cluster-robust variance, each term with its own G / (G - 1) correction); without clusters
each output is its own cluster and the terms are the usual sample variances. Intervals are normal (z) intervals.
The power-tuned PPI++ is not used: the report shows the human-only interval beside it, so a judge too weakly
related to people to help is visible there.

The reports' tables (`ppi_<judge>.csv`, columns in docs/formats.md) hold one row per cell and dimension; each
study builds its own on `human_anchored_table`, from its outputs, their judge scores, human ratings and clusters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import with_interval

pd = lazy_module("pandas")

DEFAULT_LEVEL = 0.95
"""Coverage of every interval."""


@dataclass(frozen=True)
class MeanInterval:
    """A mean with its normal interval (NaN bounds when there is too little to estimate the variance)."""

    mean: float
    lo: float
    hi: float


@dataclass(frozen=True)
class HumanAnchoredMean:
    """One cell and dimension: the judge-only, human-only and prediction-powered means of the human rating."""

    n_all: int
    """Outputs with a judge score."""
    n_rated: int
    """Of those, the outputs people rated."""
    judge: MeanInterval
    """The judge's mean over all outputs (an estimate of the judge's mean, not of people's)."""
    human: MeanInterval
    """People's mean over the rated outputs."""
    ppi: MeanInterval
    """The judge's mean corrected by the mean human - judge difference on the rated outputs."""
    reason: str
    """Why an estimate or interval is missing ("" when none is)."""


def _interval(mean: float, variance: float, z: float) -> MeanInterval:
    if not math.isfinite(variance):
        return MeanInterval(mean, math.nan, math.nan)
    half = z * math.sqrt(max(variance, 0.0))
    return MeanInterval(mean, mean - half, mean + half)


def _correction(groups: int) -> float:
    """G / (G - 1): the small-sample factor that makes one output per cluster the usual sample variance."""
    return groups / (groups - 1) if groups >= 2 else math.nan


def human_anchored_mean(
    judge: Sequence[float] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    clusters: Sequence | np.ndarray | None = None,
    level: float = DEFAULT_LEVEL,
) -> HumanAnchoredMean:
    """Judge-only, human-only and prediction-powered means with their intervals, from one value per output.

    `judge` is the judge's score of each output (NaN: no score, the output is left out), `human` the mean human
    rating of each output (NaN: not rated), `clusters` the passage or story each output belongs to (default: each
    output its own). The rated outputs are those with both scores; the human-only estimate uses the same ones.
    """
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    if f.shape != y.shape or f.ndim != 1:
        raise ValueError(f"judge and human scores must be two vectors of one length, not {f.shape} and {y.shape}")
    keep = ~np.isnan(f)
    codes = np.arange(f.size) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    f, y, codes = f[keep], y[keep], codes[keep]
    rated = ~np.isnan(y)
    n_all, n_rated = int(f.size), int(rated.sum())
    z = NormalDist().inv_cdf(0.5 + level / 2)
    missing = MeanInterval(math.nan, math.nan, math.nan)
    if n_all == 0:
        return HumanAnchoredMean(0, 0, missing, missing, missing, "no output with a judge score")

    def cluster_sums(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=int(codes.max()) + 1)

    centred_judge = cluster_sums(f - f.mean())
    all_factor = _correction(np.unique(codes).size)
    judge_only = _interval(float(f.mean()), all_factor * float(centred_judge @ centred_judge) / n_all**2, z)
    if n_rated == 0:
        return HumanAnchoredMean(n_all, 0, judge_only, missing, missing, "no rated output")
    difference = y[rated] - f[rated]
    centred_difference = cluster_sums(np.where(rated, y - f - difference.mean(), 0.0))
    centred_human = cluster_sums(np.where(rated, y - y[rated].mean(), 0.0))
    rated_factor = _correction(np.unique(codes[rated]).size)
    human_variance = rated_factor * float(centred_human @ centred_human) / n_rated**2
    ppi_variance = (all_factor * float(centred_judge @ centred_judge) / n_all**2
                    + rated_factor * (float(centred_difference @ centred_difference) / n_rated**2
                                      + 2 * float(centred_judge @ centred_difference) / (n_all * n_rated)))
    reasons = []
    if not math.isfinite(all_factor):
        reasons.append("judge scores from fewer than two clusters: no judge interval")
    if not math.isfinite(rated_factor):
        reasons.append("rated outputs from fewer than two clusters: no human or PPI interval")
    return HumanAnchoredMean(
        n_all, n_rated, judge_only,
        _interval(float(y[rated].mean()), human_variance, z),
        _interval(float(f.mean() + difference.mean()), ppi_variance, z),
        "; ".join(reasons),
    )


ESTIMATES: tuple[str, ...] = ("judge", "human", "ppi")
"""The three estimates of a table row, each a column with its `_lo` and `_hi`."""


def judge_score(dimension: str) -> str:
    """The column of an output's judge score of one dimension, in the frame `human_anchored_table` reads."""
    return f"judge/{dimension}"


def human_rating(dimension: str) -> str:
    """The column of an output's mean human rating of one dimension, in that frame."""
    return f"human/{dimension}"


def human_anchored_table(outputs: pd.DataFrame, cell_keys: Sequence[str], dimensions: Sequence[str],
                         cluster: str, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """One row per cell and dimension of the cells where people rated some output: *cell_keys, dimension, n_all,
    n_rated, judge, judge_lo, judge_hi, human, human_lo, human_hi, ppi, ppi_lo, ppi_hi, reason.

    `outputs` has one row per output: the cell keys, the `cluster` column, and per dimension its judge score
    `judge/<dimension>` and mean human rating `human/<dimension>` (NaN: none)."""
    columns = [*cell_keys, "dimension", "n_all", "n_rated",
               *(column for name in ESTIMATES for column in with_interval(name)), "reason"]
    rows = []
    for keys, cell in outputs.groupby(list(cell_keys), sort=True):
        if cell[[human_rating(d) for d in dimensions]].isna().all(axis=None):
            continue  # nobody rated this cell: nothing to anchor
        for dimension in dimensions:
            result = human_anchored_mean(cell[judge_score(dimension)], cell[human_rating(dimension)], cell[cluster],
                                         level)
            row = {**dict(zip(cell_keys, keys)), "dimension": dimension, "n_all": result.n_all,
                   "n_rated": result.n_rated, "reason": result.reason}
            for name in ESTIMATES:
                estimate = getattr(result, name)
                row.update(zip(with_interval(name), (estimate.mean, estimate.lo, estimate.hi), strict=True))
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


__all__ = ["DEFAULT_LEVEL", "ESTIMATES", "HumanAnchoredMean", "MeanInterval", "human_anchored_mean",
           "human_anchored_table"]
