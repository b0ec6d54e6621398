"""The alternative annotator test (stats.alt_test): a hand-worked case, the t distribution and the
Benjamini-Yekutieli correction. Its agreement with the reference implementation's published numbers on the
paper's data is bench/alt_test_reference.py (that data has no licence, so it is not copied here)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from narrative_eval.stats.alt_test import (
    alternative_annotator_test,
    benjamini_yekutieli,
    one_sided_p_value,
    student_t_cdf,
)

# Three raters rate four outputs; the judge gives exactly rater r0's ratings.
RATINGS = [[1, 2, 3, 4],
           [1, 2, 3, 5],
           [2, 2, 3, 4]]
JUDGE = [1, 2, 3, 4]


def t3_cdf(t: float) -> float:
    """Student's t with 3 degrees of freedom in closed form."""
    return 0.5 + (t / (math.sqrt(3) * (1 + t * t / 3)) + math.atan(t / math.sqrt(3))) / math.pi


def test_a_hand_worked_case():
    # Leaving r0 out: the judge gives r0's ratings, so every output is a tie (d = 0 four times; constant, below
    # epsilon: p = 0). Leaving r1 out: on output 3 the others say 4 and 4, r1 says 5, the judge 4: the judge wins
    # (d = -1), ties elsewhere: d = [0, 0, 0, -1], mean -0.25, SD 0.5, t = (-0.25 - 0.2) / (0.5 / 2) = -1.8.
    # Leaving r2 out: the same on output 0. The judge is at least as good on every output: advantage 1.
    result = alternative_annotator_test(RATINGS, JUDGE, ["r0", "r1", "r2"], epsilon=0.2, min_outputs=2)
    p = t3_cdf(-1.8)
    assert result.p_values == (0.0, pytest.approx(p), pytest.approx(p))
    assert p == pytest.approx(0.0849, abs=1e-4)
    # Benjamini-Yekutieli over 3 tests at q = 0.05: thresholds k/3 * 0.05 / (1 + 1/2 + 1/3) = 0.0091, 0.0182,
    # 0.0273; only p = 0 is under its threshold: the judge wins against one rater of three.
    assert result.winning_rate == pytest.approx(1 / 3)
    assert result.advantage_probability == 1.0
    assert not result.passed and (result.n_raters, result.n_outputs) == (3, 4)
    # At q = 0.5 the thresholds are 0.091, 0.182, 0.273: all three rejected.
    assert alternative_annotator_test(RATINGS, JUDGE, epsilon=0.2, q=0.5, min_outputs=2).winning_rate == 1.0
    # A margin of 0 asks the judge to beat people outright: all ties (mean d = 0) are not below 0 (p = 1), and
    # mean d = -0.25 with t = -1 is not below it with any confidence at q = 0.05.
    strict = alternative_annotator_test(RATINGS, JUDGE, epsilon=0.0, min_outputs=2)
    assert strict.p_values == (1.0, pytest.approx(t3_cdf(-1.0)), pytest.approx(t3_cdf(-1.0)))
    assert strict.winning_rate == 0.0


def test_raters_with_too_few_shared_outputs_are_left_out():
    ratings = np.array(RATINGS, dtype=float)
    ratings[2, 1:] = np.nan  # r2 now shares one output
    result = alternative_annotator_test(ratings, JUDGE, ["a", "b", "c"], min_outputs=2)
    assert result.raters == ("a", "b") and "c (1)" in result.reason
    nothing = alternative_annotator_test(RATINGS, JUDGE, min_outputs=30)
    assert math.isnan(nothing.winning_rate) and nothing.n_raters == 0 and "no rater to test" in nothing.reason
    # An output the judge did not score, or only one rater rated, is no evidence either way.
    partial = alternative_annotator_test(RATINGS, [1, math.nan, 3, 4], min_outputs=2)
    assert partial.n_outputs == 3
    with pytest.raises(ValueError, match="raters x outputs"):
        alternative_annotator_test(RATINGS, [1, 2])


def test_the_t_distribution_and_the_correction():
    for t in (-6.0, -1.8, -0.3, 0.0, 0.7, 2.5):
        for df in (1, 3, 12, 250):
            assert student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-10)
    values = np.array([0.0, -1.0, 1.0, 0.0, -1.0, 0.0, 0.0, -1.0])
    assert one_sided_p_value(values, 0.1) == pytest.approx(stats.ttest_1samp(values, 0.1, alternative="less").pvalue)
    assert one_sided_p_value(np.zeros(5), 0.1) == 0.0 and one_sided_p_value(np.zeros(5), 0.0) == 1.0
    p = [0.001, 0.2, 0.012, math.nan]
    # m = 4, H = 25/12: thresholds 0.006, 0.012, 0.018, 0.024; sorted 0.001 and 0.012 pass, 0.2 does not.
    assert benjamini_yekutieli(p).tolist() == [True, False, True, False]
