"""Prediction-powered means (stats.ppi): hand values, edge cases, and coverage by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narrative_eval.stats.ppi import human_anchored_mean

Z95 = 1.959963984540054

# Simulated sweeps: each output has a quality q; people rate q plus noise, the judge rates q plus a fixed bias
# plus its own noise. The true mean of the human rating is TRUE_MEAN.
SWEEPS, N_OUTPUTS, N_RATED = 1000, 400, 60
TRUE_MEAN, JUDGE_BIAS = 3.0, 0.6
QUALITY_SD, HUMAN_NOISE_SD, JUDGE_NOISE_SD = 0.8, 0.5, 0.4


def simulated_sweeps(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Judge scores of every output and human ratings of the first N_RATED (NaN elsewhere), one row per sweep.
    Outputs are exchangeable, so rating the first ones is rating a random subset."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(TRUE_MEAN, QUALITY_SD, (SWEEPS, N_OUTPUTS))
    judge = quality + JUDGE_BIAS + rng.normal(0, JUDGE_NOISE_SD, quality.shape)
    human = quality + rng.normal(0, HUMAN_NOISE_SD, quality.shape)
    human[:, N_RATED:] = np.nan
    return judge, human


def test_a_biased_judge_is_corrected_and_the_interval_covers_the_true_mean():
    judge, human = simulated_sweeps(seed=20240601)
    estimates = [human_anchored_mean(j, h) for j, h in zip(judge, human)]

    def covers(interval):
        return interval.lo <= TRUE_MEAN <= interval.hi

    ppi_coverage = np.mean([covers(e.ppi) for e in estimates])
    judge_coverage = np.mean([covers(e.judge) for e in estimates])
    human_coverage = np.mean([covers(e.human) for e in estimates])
    assert 0.93 <= ppi_coverage <= 0.97
    assert 0.93 <= human_coverage <= 0.97
    assert judge_coverage < 0.05  # the judge-only interval sits around the judge's bias, not people's mean
    ppi_width = np.mean([e.ppi.hi - e.ppi.lo for e in estimates])
    human_width = np.mean([e.human.hi - e.human.lo for e in estimates])
    # The judge correlates with people (shared quality), so its scores of the unrated outputs narrow the interval.
    assert ppi_width < 0.85 * human_width
    assert np.mean([e.ppi.mean for e in estimates]) == pytest.approx(TRUE_MEAN, abs=0.01)


def test_hand_values_with_the_overlap_covariance():
    # Four outputs, two rated. f = [1, 2, 3, 4], y = [2, 2, nan, nan]: d = y - f = [1, 0] on the rated ones.
    result = human_anchored_mean([1, 2, 3, 4], [2, 2, math.nan, math.nan])
    assert (result.n_all, result.n_rated, result.reason) == (4, 2, "")
    assert result.judge.mean == 2.5 and result.human.mean == 2.0
    assert result.ppi.mean == pytest.approx(2.5 + 0.5)
    # var(f) = 5/3 over 4; var(d) = 1/2 over 2; cov(f, d) on the rated outputs = -1/2, twice over 4.
    ppi_se = math.sqrt(5 / 3 / 4 + 0.5 / 2 + 2 * -0.5 / 4)
    assert (result.ppi.lo, result.ppi.hi) == (pytest.approx(3 - Z95 * ppi_se), pytest.approx(3 + Z95 * ppi_se))
    judge_se = math.sqrt(5 / 3 / 4)
    assert result.judge.hi == pytest.approx(2.5 + Z95 * judge_se)
    assert result.human.lo == result.human.hi == 2.0  # both raters gave 2: no spread


def test_every_output_rated_gives_the_human_only_estimate():
    rng = np.random.default_rng(5)
    judge, human = rng.normal(3, 1, 30), rng.normal(3, 1, 30)
    clusters = np.repeat(np.arange(10), 3)
    for grouping in (None, clusters):
        result = human_anchored_mean(judge, human, grouping)
        assert result.ppi.mean == pytest.approx(result.human.mean)
        assert (result.ppi.lo, result.ppi.hi) == (pytest.approx(result.human.lo), pytest.approx(result.human.hi))


def test_clusters_widen_the_interval_of_correlated_outputs():
    # Three outputs per passage share the passage's quality: treating them as independent understates the spread.
    rng = np.random.default_rng(11)
    passage_quality = np.repeat(rng.normal(3, 1, 40), 3)
    judge = passage_quality + rng.normal(0, 0.3, 120)
    human = np.where(np.arange(120) < 45, passage_quality + rng.normal(0, 0.3, 120), np.nan)
    passages = np.repeat(np.arange(40), 3)
    clustered = human_anchored_mean(judge, human, passages)
    independent = human_anchored_mean(judge, human)
    assert clustered.ppi.mean == independent.ppi.mean
    assert clustered.ppi.hi - clustered.ppi.lo > 1.3 * (independent.ppi.hi - independent.ppi.lo)


def test_missing_scores_and_too_few_outputs():
    # A NaN judge score drops the output, even a rated one.
    result = human_anchored_mean([3, math.nan, 4, 5], [3, 1, math.nan, math.nan])
    assert (result.n_all, result.n_rated) == (3, 1)
    assert result.human.mean == 3.0 and result.ppi.mean == pytest.approx(4 + 0)
    assert math.isnan(result.ppi.lo) and math.isnan(result.human.hi) and not math.isnan(result.judge.lo)
    assert "fewer than two clusters" in result.reason
    unrated = human_anchored_mean([3, 4], [math.nan, math.nan])
    assert unrated.n_rated == 0 and math.isnan(unrated.ppi.mean) and unrated.reason == "no rated output"
    nothing = human_anchored_mean([math.nan], [2])
    assert nothing.n_all == 0 and math.isnan(nothing.judge.mean) and nothing.reason == "no output with a judge score"
    with pytest.raises(ValueError, match="one length"):
        human_anchored_mean([1, 2], [1])
