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

PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient prediction-powered inference", arXiv 2311.01453, 2023)
leans on the judge only as far as it helps: ppi(lambda) = lambda mean(f over N) + mean(y - lambda f over n), unbiased
for every lambda. Its variance is a quadratic in lambda (the terms above with f scaled by lambda); the tuned lambda
is its minimiser, estimated from the same data (asymptotically valid, as in the paper). lambda = 1 is plain PPI and
lambda = 0 the human-only mean, and the tuned lambda minimises the same estimated variance, so the tuned interval is
never wider than either of theirs; lambda is not clipped (a judge on a compressed scale earns lambda > 1). Its value is reported beside the estimate (`lambda`).

Rating where it counts (active inference, Zrnic and Candes, "Active statistical inference", arXiv 2403.03208, 2024;
stratified PPI, Fisch et al. 2024, arXiv 2406.04291): a cell's outputs fall into strata by how uncertain the judge
is about them, and people rate a uniform random subset of each stratum, more of the uncertain ones. Each stratum's
PPI++ estimate weighted by its share of the outputs (`stratified_mean`) is unbiased whatever the strata's rating
rates (a rating's inverse-probability weight is N_h / n_h), and narrower than one uniform sample where the judge's
errors are largest in the strata rated most. An inverse-probability-weighted estimate over outputs drawn one by one
with unequal probabilities (Poisson sampling) was tried first: with tuned weights its interval covered 0.90-0.93
in tests/stats/test_ppi_power.py's simulation (rare heavily weighted ratings), where the stratified one covers 0.94.

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
    ppi_tuned: MeanInterval
    """PPI++: the judge's mean weighted by `tuning`, corrected by the mean human - tuning x judge difference."""
    tuning: float
    """PPI++'s lambda, the variance-minimising weight on the judge (NaN when the variance does not depend on it)."""
    tuned_variance: tuple[float, float]
    """PPI++'s variance in two parts, (one that more ratings leave as it is: the judge's spread over all outputs
    and its covariance with the rated differences; one that falls as 1 / n_rated): what a rating plan reads."""
    reason: str
    """Why an estimate or interval is missing ("" when none is)."""


def _interval(mean: float, variance: float, z: float) -> MeanInterval:
    if not math.isfinite(variance):
        return MeanInterval(mean, math.nan, math.nan)
    half = z * math.sqrt(max(variance, 0.0))
    return MeanInterval(mean, mean - half, mean + half)


def _tuning(judge_all: np.ndarray, judge_rated: np.ndarray, human_rated: np.ndarray, n_all: int, n_rated: int,
            all_factor: float, rated_factor: float) -> float:
    """PPI++'s lambda: the minimiser of var(ppi(lambda)) = lambda^2 a + lambda b + c, from the cluster sums of the
    centred judge scores of all outputs (A) and of the rated ones (C), and of the centred human ratings (B)."""
    a = (all_factor * float(judge_all @ judge_all) / n_all**2
         + rated_factor * (float(judge_rated @ judge_rated) / n_rated**2
                           - 2 * float(judge_all @ judge_rated) / (n_all * n_rated)))
    half_b = rated_factor * (float(judge_all @ human_rated) / (n_all * n_rated) - float(judge_rated @ human_rated) / n_rated**2)
    return -half_b / a if math.isfinite(a) and a > 1e-12 * max(1.0, abs(half_b)) else math.nan


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
        return HumanAnchoredMean(0, 0, missing, missing, missing, missing, math.nan, (math.nan, math.nan),
                                 "no output with a judge score")

    def cluster_sums(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=int(codes.max()) + 1)

    centred_judge = cluster_sums(f - f.mean())
    all_factor = _correction(np.unique(codes).size)
    judge_only = _interval(float(f.mean()), all_factor * float(centred_judge @ centred_judge) / n_all**2, z)
    if n_rated == 0:
        return HumanAnchoredMean(n_all, 0, judge_only, missing, missing, missing, math.nan, (math.nan, math.nan),
                                 "no rated output")
    centred_human = cluster_sums(np.where(rated, y - y[rated].mean(), 0.0))
    centred_rated_judge = cluster_sums(np.where(rated, f - f[rated].mean(), 0.0))
    rated_factor = _correction(np.unique(codes[rated]).size)
    human_variance = rated_factor * float(centred_human @ centred_human) / n_rated**2

    def variance_parts(weight: float) -> tuple[float, float]:
        """var(ppi(weight)) as (the judge's term and the overlap's covariance, the rated differences' term)."""
        difference = centred_human - weight * centred_rated_judge
        return (all_factor * weight**2 * float(centred_judge @ centred_judge) / n_all**2
                + rated_factor * 2 * weight * float(centred_judge @ difference) / (n_all * n_rated),
                rated_factor * float(difference @ difference) / n_rated**2)

    def powered(weight: float) -> MeanInterval:
        """ppi(weight) with its variance: the three terms with the judge's scores scaled by `weight`."""
        return _interval(float(weight * f.mean() + (y[rated] - weight * f[rated]).mean()), sum(variance_parts(weight)), z)

    tuning = _tuning(centred_judge, centred_rated_judge, centred_human, n_all, n_rated, all_factor, rated_factor)
    reasons = []
    if not math.isfinite(all_factor):
        reasons.append("judge scores from fewer than two clusters: no judge interval")
    if not math.isfinite(rated_factor):
        reasons.append("rated outputs from fewer than two clusters: no human or PPI interval")
    elif not math.isfinite(tuning):
        reasons.append("every output rated (or no judge spread): PPI++ has no weight to tune")
    return HumanAnchoredMean(
        n_all, n_rated, judge_only,
        _interval(float(y[rated].mean()), human_variance, z),
        powered(1.0),
        powered(tuning) if math.isfinite(tuning) else missing,
        tuning,
        variance_parts(tuning) if math.isfinite(tuning) else (math.nan, math.nan),
        "; ".join(reasons),
    )


ESTIMATES: tuple[str, ...] = ("judge", "human", "ppi", "ppi_tuned")
"""The three estimates of a table row, each a column with its `_lo` and `_hi`."""


def judge_score(dimension: str) -> str:
    """The column of an output's judge score of one dimension, in the frame `human_anchored_table` reads."""
    return f"judge/{dimension}"


def human_rating(dimension: str) -> str:
    """The column of an output's mean human rating of one dimension, in that frame."""
    return f"human/{dimension}"


@dataclass(frozen=True)
class AnchoredOutputs:
    """A study's outputs judged by one judge and partly rated by people, in the frame human_anchored_table reads:
    what its PPI table, rating plan and rate-next order are computed from."""

    judge: str
    """The judge id."""
    outputs: pd.DataFrame
    """One row per output: the cell keys, the cluster column, judge_score(d) and human_rating(d) per dimension."""
    cell_keys: tuple[str, ...]
    """The columns that name a cell (infilling: model, setting; incremental: model, condition)."""
    dimensions: tuple[str, ...]
    """The judge's dimensions."""
    cluster: str
    """The column of the unit outputs are resampled by (a passage, a story)."""

    def table(self, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
        """Its `ppi_<judge>` table."""
        return human_anchored_table(self.outputs, self.cell_keys, self.dimensions, self.cluster, level)


def human_anchored_table(outputs: pd.DataFrame, cell_keys: Sequence[str], dimensions: Sequence[str],
                         cluster: str, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """One row per cell and dimension of the cells where people rated some output: *cell_keys, dimension, n_all,
    n_rated, judge, judge_lo, judge_hi, human, human_lo, human_hi, ppi, ppi_lo, ppi_hi, ppi_tuned, ppi_tuned_lo,
    ppi_tuned_hi, lambda (PPI++'s weight on the judge), reason.

    `outputs` has one row per output: the cell keys, the `cluster` column, and per dimension its judge score
    `judge/<dimension>` and mean human rating `human/<dimension>` (NaN: none)."""
    columns = [*cell_keys, "dimension", "n_all", "n_rated",
               *(column for name in ESTIMATES for column in with_interval(name)), "lambda", "reason"]
    rows = []
    for keys, cell in outputs.groupby(list(cell_keys), sort=True):
        if cell[[human_rating(d) for d in dimensions]].isna().all(axis=None):
            continue  # nobody rated this cell: nothing to anchor
        for dimension in dimensions:
            result = human_anchored_mean(cell[judge_score(dimension)], cell[human_rating(dimension)], cell[cluster],
                                         level)
            row = {**dict(zip(cell_keys, keys)), "dimension": dimension, "n_all": result.n_all,
                   "n_rated": result.n_rated, "lambda": result.tuning, "reason": result.reason}
            for name in ESTIMATES:
                estimate = getattr(result, name)
                row.update(zip(with_interval(name), (estimate.mean, estimate.lo, estimate.hi), strict=True))
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class StratifiedMean:
    """The stratified PPI++ estimate of a cell's mean human rating (ratings drawn within strata of the outputs)."""

    n_all: int
    """Outputs with a judge score."""
    n_rated: int
    """Of those, the outputs people rated."""
    estimate: MeanInterval
    """sum_h (N_h / N) ppi_tuned_h with its normal interval."""
    strata: int
    """Strata with a judge score."""
    reason: str
    """Why the estimate or its interval is missing ("" when neither is)."""


def stratified_mean(
    judge: Sequence[float] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    strata: Sequence | np.ndarray,
    clusters: Sequence | np.ndarray | None = None,
    level: float = DEFAULT_LEVEL,
) -> StratifiedMean:
    """Stratified PPI++: the outputs fall into strata (by how uncertain the judge is about them) and people rate a
    uniform random subset of each, more where the judge is least certain; each stratum's PPI++ estimate (its
    human-only mean when every output of it was rated) is weighted by its share of the outputs, N_h / N, and the
    variances add with weights (N_h / N)^2. Unbiased for the mean human rating whatever the strata's rating rates,
    which is what lets ratings go where they count (Fisch, Maynez, Hofer, Dhingra, Globerson and Cohen, "Stratified
    prediction-powered inference for effective hybrid evaluation of language models", arXiv 2406.04291, 2024).
    A cluster that spans two strata counts as two (their covariance is left out)."""
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    labels = np.asarray(strata)
    if not f.shape == y.shape == labels.shape or f.ndim != 1:
        raise ValueError(f"judge, human and strata must be vectors of one length, not {f.shape}, {y.shape}, "
                         f"{labels.shape}")
    groups = np.arange(f.size) if clusters is None else np.asarray(clusters)
    keep = ~np.isnan(f)
    n_all, n_rated = int(keep.sum()), int((keep & ~np.isnan(y)).sum())
    missing = MeanInterval(math.nan, math.nan, math.nan)
    if n_all == 0:
        return StratifiedMean(0, 0, missing, 0, "no output with a judge score")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    present = sorted(set(labels[keep].tolist()), key=str)
    mean = variance = 0.0
    reasons = []
    for stratum in present:
        inside = keep & (labels == stratum)
        result = human_anchored_mean(f[inside], y[inside], groups[inside], level)
        part = result.ppi_tuned if math.isfinite(result.tuning) else result.human
        share = inside.sum() / n_all
        mean += share * part.mean
        variance += share**2 * ((part.hi - part.lo) / (2 * z)) ** 2
        if not math.isfinite(part.hi):
            reasons.append(f"stratum {stratum}: {result.reason or 'no interval'}")
    return StratifiedMean(n_all, n_rated, _interval(mean, variance, z), len(present), "; ".join(reasons))

__all__ = ["DEFAULT_LEVEL", "ESTIMATES", "AnchoredOutputs", "HumanAnchoredMean", "MeanInterval", "StratifiedMean", "human_anchored_mean",
           "human_anchored_table", "stratified_mean"]
