"""The alternative annotator test: can a judge stand in for the people who rated the same outputs?

Calderon, Reichart and Dror, "The Alternative Annotator Test for LLM-as-a-Judge: How to Statistically Justify
Replacing Human Annotators with LLMs", ACL 2025. Correlation with people says how far a judge tracks them, not
whether it could replace one of them; the test asks that directly, leaving one rater out at a time:

- for rater j and every output i that j and at least one other rater rated, the judge's and rater j's alignment
  with the *remaining* raters of i (here the negative root mean squared difference, the paper's score for
  numeric ratings); W_ij^judge = 1 when the judge aligns at least as well as rater j, W_ij^rater = 1 when j
  aligns at least as well as the judge (a tie counts for both);
- d_ij = W_ij^rater - W_ij^judge, and a one-sided t-test of H0: mean_i d_ij >= epsilon against
  H1: mean_i d_ij < epsilon. epsilon is a cost margin: how much better a person must be to be worth their cost
  (the paper's guidance: 0.2 for experts, 0.15 for skilled annotators, 0.1 for crowd workers);
- the raters' p-values are corrected together by the Benjamini-Yekutieli procedure at level q (0.05); the judge
  "wins" against every rater whose hypothesis is rejected. The *winning rate* is the share of raters it wins
  against, and the judge passes when it is at least 0.5;
- the *advantage probability* is the mean over raters of mean_i W_ij^judge: the chance that the judge is at least
  as good as a randomly picked rater on a random output (it compares judges; no epsilon in it).

A rater with fewer than `min_outputs` outputs shared with another rater (the paper's 30) is left out; the test
needs two raters at least, and the paper recommends three or more so the remaining raters are a consensus.

One departure from the reference code (github.com/nitaytech/AltTest, which uses scipy's t-test): when every d_ij of
a rater is the same, scipy's t statistic is undefined and its p-value NaN (never rejected); here the t statistic
is then minus or plus infinity (p = 0 when that constant is below epsilon, else 1), its limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from narrative_eval.lazy import lazy_module

pd = lazy_module("pandas")

EPSILON = 0.2
"""The cost margin by default: the paper's value for expert raters (0.15 skilled, 0.1 crowd workers)."""

EPSILON_HELP = (f"the alternative annotator test's cost margin (default {EPSILON}: expert raters; the paper suggests "
                "0.15 for skilled raters, 0.1 for crowd workers)")
"""What a report command's --alt-test-epsilon says."""

FDR_LEVEL = 0.05
"""q of the Benjamini-Yekutieli correction over the raters' tests (the paper's)."""

MIN_OUTPUTS = 30
"""Outputs a rater must share with another rater to be tested (the paper's minimum)."""

MIN_RATERS = 3
"""Raters of the same outputs the reports ask for before running the test (the paper's recommendation)."""


@dataclass(frozen=True)
class AltTestResult:
    """The test of one judge on one dimension."""

    winning_rate: float
    """Share of the tested raters the judge wins against (NaN when no rater could be tested)."""
    advantage_probability: float
    """Mean over the tested raters of the share of outputs where the judge aligns at least as well."""
    epsilon: float
    """The cost margin used."""
    n_raters: int
    """Raters tested."""
    n_outputs: int
    """Outputs rated by two raters or more that the judge scored."""
    p_values: tuple[float, ...]
    """Each tested rater's one-sided p-value, in the order of `raters`."""
    raters: tuple[str, ...]
    """The tested raters."""
    reason: str
    """Why raters were left out or the test is empty ("" when neither)."""

    @property
    def passed(self) -> bool:
        """The paper's verdict: the judge wins against half the raters or more."""
        return self.winning_rate >= 0.5


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (the statistics layer has no scipy)."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t < 0 else 1.0
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t < 0 else 1.0 - tail


def one_sided_p_value(values: np.ndarray, bound: float) -> float:
    """p-value of the one-sample t-test of H0: mean >= bound against H1: mean < bound."""
    n = values.size
    if n < 2:
        return math.nan
    gap = float(values.mean()) - bound
    sd = float(values.std(ddof=1))
    if sd == 0.0:
        return 0.0 if gap < 0 else 1.0  # the t statistic's limit: -inf below the bound, +inf (or 0/0) at or above
    return student_t_cdf(gap / (sd / math.sqrt(n)), n - 1)


def benjamini_yekutieli(p_values: Sequence[float], q: float = FDR_LEVEL) -> np.ndarray:
    """Which hypotheses the Benjamini-Yekutieli step-up procedure rejects at false discovery rate q (valid under any
    dependence between the tests: the raters' tests share outputs). NaN p-values are never rejected."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    rejected = np.zeros(m, dtype=bool)
    if m == 0:
        return rejected
    order = np.argsort(np.where(np.isnan(p), np.inf, p), kind="stable")
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
    thresholds = np.arange(1, m + 1) / m * q / harmonic
    below = np.nonzero(p[order] <= thresholds)[0]
    if below.size:
        rejected[order[: below[-1] + 1]] = True
    return rejected


def _neg_rmse(value: float | np.ndarray, others: np.ndarray) -> np.ndarray:
    """Alignment of one rating (or one per row) with the remaining raters' ratings of the same output."""
    return -np.sqrt(np.nanmean((others - np.asarray(value)[..., None]) ** 2, axis=-1))


def alternative_annotator_test(
    human: np.ndarray | Sequence[Sequence[float]],
    judge: np.ndarray | Sequence[float],
    raters: Sequence[str] | None = None,
    epsilon: float = EPSILON,
    q: float = FDR_LEVEL,
    min_outputs: int = MIN_OUTPUTS,
) -> AltTestResult:
    """The test from a raters x outputs matrix of ratings (NaN: not rated) and the judge's score of each output
    (NaN: no score; the output is left out). `raters` names the matrix's rows (default r0, r1, ...)."""
    ratings = np.asarray(human, dtype=float)
    scores = np.asarray(judge, dtype=float)
    if ratings.ndim != 2 or scores.shape != (ratings.shape[1],):
        raise ValueError(f"ratings must be raters x outputs and the judge one score per output, not {ratings.shape} "
                         f"and {scores.shape}")
    names = tuple(raters) if raters is not None else tuple(f"r{k}" for k in range(ratings.shape[0]))
    if len(names) != ratings.shape[0]:
        raise ValueError(f"{len(names)} rater names for {ratings.shape[0]} rows of ratings")
    rated = ~np.isnan(ratings)
    shared = (rated.sum(axis=0) >= 2) & ~np.isnan(scores)
    ratings, scores, rated = ratings[:, shared], scores[shared], rated[:, shared]
    p_values, advantages, tested, skipped = [], [], [], []
    for j, name in enumerate(names):
        outputs = np.nonzero(rated[j])[0]
        if outputs.size < min_outputs:
            skipped.append(f"{name} ({outputs.size})")
            continue
        others = np.delete(ratings[:, outputs], j, axis=0).T  # outputs x remaining raters, NaN where not rated
        rater_alignment = _neg_rmse(ratings[j, outputs], others)
        judge_alignment = _neg_rmse(scores[outputs], others)
        judge_wins = (judge_alignment >= rater_alignment).astype(float)
        rater_wins = (rater_alignment >= judge_alignment).astype(float)
        p_values.append(one_sided_p_value(rater_wins - judge_wins, epsilon))
        advantages.append(float(judge_wins.mean()))
        tested.append(name)
    reasons = [f"left out, fewer than {min_outputs} outputs shared with another rater: {', '.join(skipped)}"] if skipped else []
    if not tested:
        reasons.append("no rater to test")
        return AltTestResult(math.nan, math.nan, epsilon, 0, int(shared.sum()), (), (), "; ".join(reasons))
    wins = benjamini_yekutieli(p_values, q)
    return AltTestResult(float(wins.mean()), float(np.mean(advantages)), epsilon, len(tested), int(shared.sum()),
                         tuple(p_values), tuple(tested), "; ".join(reasons))


ALT_TEST_COLUMNS: tuple[str, ...] = ("epsilon", "n_raters", "n_outputs", "winning_rate", "advantage_probability",
                                     "passed", "reason")
"""The columns of an `alt_test_<judge>` row after its keys (docs/formats.md)."""


def alt_test_row(result: AltTestResult) -> dict:
    """A result as a table row (ALT_TEST_COLUMNS)."""
    return {"epsilon": result.epsilon, "n_raters": result.n_raters, "n_outputs": result.n_outputs,
            "winning_rate": result.winning_rate, "advantage_probability": result.advantage_probability,
            "passed": bool(result.passed) if result.n_raters else None, "reason": result.reason}


def alt_test_table(ratings: pd.DataFrame, judge: pd.DataFrame, output: str, dimensions: Sequence[str],
                   epsilon: float = EPSILON, min_outputs: int = MIN_OUTPUTS) -> pd.DataFrame:
    """A report's `alt_test_<judge>`: one row per dimension (dimension, then ALT_TEST_COLUMNS).

    `ratings` has one row per rater and output (`rater`, the `output` column, one column per dimension, NaN: not
    rated); `judge` one row per output (`output`, one column per dimension: the judge's score). The test runs where
    MIN_RATERS raters or more rated some output; otherwise the row says so and its numbers are empty."""
    rows = []
    for dimension in dimensions:
        rated = ratings.dropna(subset=[dimension]) if dimension in ratings else ratings.iloc[0:0]
        most = int(rated.groupby(output)["rater"].nunique().max()) if not rated.empty else 0
        if most < MIN_RATERS:
            rows.append({"dimension": dimension, "epsilon": epsilon, "n_raters": 0, "n_outputs": 0,
                         "winning_rate": math.nan, "advantage_probability": math.nan, "passed": None,
                         "reason": f"no output rated by {MIN_RATERS} raters or more (at most {most})"})
            continue
        matrix = rated.pivot_table(index="rater", columns=output, values=dimension, aggfunc="mean")
        scores = judge.drop_duplicates(output).set_index(output)[dimension].reindex(matrix.columns)
        result = alternative_annotator_test(matrix.to_numpy(dtype=float), scores.to_numpy(dtype=float),
                                            [str(r) for r in matrix.index], epsilon, min_outputs=min_outputs)
        rows.append({"dimension": dimension, **alt_test_row(result)})
    return pd.DataFrame(rows, columns=["dimension", *ALT_TEST_COLUMNS])


__all__ = ["ALT_TEST_COLUMNS", "EPSILON", "EPSILON_HELP", "FDR_LEVEL", "MIN_OUTPUTS", "MIN_RATERS", "AltTestResult", "alt_test_row", "alt_test_table",
           "alternative_annotator_test", "benjamini_yekutieli", "one_sided_p_value", "student_t_cdf"]
