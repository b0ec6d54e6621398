"""Agreement statistics against hand computations, scipy, and Krippendorff's published examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from narrative_eval.judges.agreement import (
    cohen_kappa,
    exact_agreement,
    kendall_tau_systems,
    krippendorff_alpha,
    mae,
    ratings_matrix,
    spearman,
)
from narrative_eval.records import JudgeResult

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C:
# 4 observers x 12 units, values 1-5, with missing data.
TEXTBOOK = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
# The values the paper reports, to its three decimals.
TEXTBOOK_ALPHA = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


@pytest.mark.parametrize("level", list(TEXTBOOK_ALPHA))
def test_krippendorff_alpha_on_the_textbook_example(level):
    assert krippendorff_alpha(TEXTBOOK, level=level) == pytest.approx(TEXTBOOK_ALPHA[level], abs=5e-4)


def test_krippendorff_alpha_binary_textbook_example():
    # Same paper, section A: two observers, ten units, binary data; alpha = 0.095.
    coder_a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    coder_b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    assert krippendorff_alpha([coder_a, coder_b], level="nominal") == pytest.approx(0.095, abs=5e-4)


def test_krippendorff_alpha_edge_cases():
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3], [1, 2, 3]]) == 1.0
    assert math.isnan(krippendorff_alpha([[3, 3], [3, 3]]))  # no variation at all
    # Units rated by one rater only carry no information.
    assert krippendorff_alpha([[1, 2, 3, 5], [1, 2, 3, None]]) == 1.0
    # Variation only on a unit rated once: the pairable ratings are constant.
    assert math.isnan(krippendorff_alpha([[3, 3, 5], [3, 3, None]]))
    # No unit rated twice, or no rating at all.
    assert math.isnan(krippendorff_alpha([[1, None], [None, 2]]))
    assert math.isnan(krippendorff_alpha([[None, None]]))


# A three-rater panel on 14 units with gaps, for the recorded values below.
PANEL = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, 5, 4, 3, 2, 5],
    [2, 2, 3, 4, 2, 2, 4, 1, None, 5, 3, 3, 1, 4],
    [1, 3, None, 4, 1, 2, 5, 2, 2, 4, None, 2, 2, 5],
]
# Values the hand-written coincidence-matrix implementation gave (commit a1e7af0), before alpha came from
# the `krippendorff` package: the switch must not move a reported number.
RECORDED_ALPHA = {
    ("TEXTBOOK", "nominal"): 0.7434210526315791,
    ("TEXTBOOK", "ordinal"): 0.8153875037548814,
    ("TEXTBOOK", "interval"): 0.8491071428571428,
    ("TEXTBOOK", "ratio"): 0.7974027747116121,
    ("PANEL", "nominal"): 0.22711864406779658,
    ("PANEL", "ordinal"): 0.8107270088402164,
    ("PANEL", "interval"): 0.8213166144200628,
    ("PANEL", "ratio"): 0.6805612335337261,
}


@pytest.mark.parametrize(("data", "level"), list(RECORDED_ALPHA))
def test_krippendorff_alpha_keeps_the_recorded_values(data, level):
    matrix = {"TEXTBOOK": TEXTBOOK, "PANEL": PANEL}[data]
    assert krippendorff_alpha(matrix, level=level) == pytest.approx(RECORDED_ALPHA[data, level], abs=1e-9)


def test_cohen_kappa_by_hand():
    # Two categories: p_o = 3/4, p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2, kappa = 1/2.
    assert cohen_kappa([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx(0.5)
    a, b = [1, 1, 2, 3], [1, 2, 2, 2]
    # p_o = 1/2; p_e = .5*.25 + .25*.75 + .25*0 = .3125; kappa = .1875 / .6875 = 3/11.
    assert cohen_kappa(a, b) == pytest.approx(3 / 11)
    # Linear: observed disagreement 0.5, expected 0.75 -> 1/3.  Quadratic: 0.5 vs 0.875 -> 3/7.
    assert cohen_kappa(a, b, weights="linear") == pytest.approx(1 / 3)
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(3 / 7)
    # Missing ratings drop the pair.
    assert cohen_kappa([0, 0, 1, 1, None], [0, 1, 1, 1, 0]) == pytest.approx(0.5)
    # Declaring unobserved categories on the scale leaves kappa unchanged (weights are relative).
    assert cohen_kappa(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5]) == pytest.approx(3 / 7)
    with pytest.raises(ValueError):
        cohen_kappa([1, 6], [1, 2], labels=[1, 2, 3])


# Two raters on 15 outputs (1-5), and two raters' pairwise verdicts (-2..2), for the recorded values below.
RATER_A = [1, 2, 2, 3, 4, 5, 5, 3, 2, 4, 1, 3, 4, 4, 2]
RATER_B = [1, 3, 2, 3, 5, 4, 5, 2, 2, 4, 2, 3, 3, 5, 1]
RATER_A_GAPPED = RATER_A[:10] + [None, 3, float("nan"), 4, 2]
VERDICTS_A = [-2, -1, 0, 1, 2, 2, 1, 0, -1, 0, 1, -2]
VERDICTS_B = [-2, 0, 0, 1, 1, 2, 2, -1, -1, 0, 0, -1]
# Values the hand-written implementation gave (commit a1e7af0), before kappa came from scikit-learn:
# weights -> (observed labels, labels 1-5 declared, with gaps).
RECORDED_KAPPA = {
    None: (0.32960893854748596, 0.32960893854748596, 0.417910447761194),
    "linear": (0.6341463414634145, 0.6341463414634145, 0.6854838709677419),
    "quadratic": (0.84, 0.84, 0.8631578947368421),
}
RECORDED_VERDICT_QWK = 0.8414096916299559
RECORDED_VERDICT_COLLAPSED_KAPPA = 0.6249999999999999


@pytest.mark.parametrize("weights", list(RECORDED_KAPPA))
def test_cohen_kappa_keeps_the_recorded_values(weights):
    observed, declared, gapped = RECORDED_KAPPA[weights]
    assert cohen_kappa(RATER_A, RATER_B, weights=weights) == pytest.approx(observed, abs=1e-9)
    assert cohen_kappa(RATER_A, RATER_B, weights=weights, labels=[1, 2, 3, 4, 5]) == pytest.approx(declared, abs=1e-9)
    assert cohen_kappa(RATER_A_GAPPED, RATER_B, weights=weights) == pytest.approx(gapped, abs=1e-9)


def test_cohen_kappa_keeps_the_recorded_verdict_values():
    levels = [-2, -1, 0, 1, 2]
    qwk = cohen_kappa(VERDICTS_A, VERDICTS_B, weights="quadratic", labels=levels)
    assert qwk == pytest.approx(RECORDED_VERDICT_QWK, abs=1e-9)
    direction_a = [int(np.sign(v)) for v in VERDICTS_A]
    direction_b = [int(np.sign(v)) for v in VERDICTS_B]
    collapsed = cohen_kappa(direction_a, direction_b, labels=[-1, 0, 1])
    assert collapsed == pytest.approx(RECORDED_VERDICT_COLLAPSED_KAPPA, abs=1e-9)


def test_cohen_kappa_edge_cases():
    # Both raters constant on the same value: chance agreement is total, kappa undefined.
    assert math.isnan(cohen_kappa([3, 3, 3], [3, 3, 3]))
    assert math.isnan(cohen_kappa([3, 3, 3], [3, 3, 3], weights="quadratic", labels=[1, 2, 3, 4, 5]))
    # Constant on different values, or one rater constant: no agreement beyond chance.
    assert cohen_kappa([3, 3, 3], [4, 4, 4]) == 0.0
    assert cohen_kappa([3, 3, 3, 3], [1, 2, 3, 4], weights="quadratic") == 0.0
    assert cohen_kappa([2], [3]) == 0.0
    assert math.isnan(cohen_kappa([2], [2]))
    # No complete pair.
    assert math.isnan(cohen_kappa([], []))
    assert math.isnan(cohen_kappa([None], [1]))
    with pytest.raises(ValueError, match="weights must be"):
        cohen_kappa([1, 2], [1, 2], weights="cubic")
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa([1, 6], [1])


def test_spearman_matches_scipy_and_its_bootstrap_is_seeded():
    rng = np.random.default_rng(1)
    x = rng.integers(1, 6, 40).astype(float)
    y = x + rng.normal(0, 1.2, 40).round()
    result = spearman(x.tolist(), y.tolist(), n_boot=500, seed=11)
    assert result.estimate == pytest.approx(stats.spearmanr(x, y).statistic)
    assert result.n == 40
    assert result.low < result.estimate < result.high
    assert spearman(x.tolist(), y.tolist(), n_boot=500, seed=11) == result
    assert spearman(x.tolist(), y.tolist(), n_boot=500, seed=12) != result
    # The interval is the percentile interval of scipy's rho over the same resamples.
    picks = np.random.default_rng(11).integers(0, 40, size=(500, 40))
    rhos = [stats.spearmanr(x[p], y[p]).statistic for p in picks]
    rhos = [r for r in rhos if not math.isnan(r)]
    low, high = np.percentile(rhos, [2.5, 97.5])
    assert (result.low, result.high) == (pytest.approx(low), pytest.approx(high))


def test_spearman_drops_missing_pairs_and_handles_tiny_samples():
    with_gaps = spearman([1, 2, None, 4, 5], [2, 1, 3, float("nan"), 5], n_boot=50)
    assert with_gaps.n == 3
    assert with_gaps.estimate == pytest.approx(stats.spearmanr([1, 2, 5], [2, 1, 5]).statistic)
    assert math.isnan(spearman([1, 2], [1, 2]).estimate)


def test_kendall_tau_at_system_level():
    metric = {"sys-a": 0.1, "sys-b": 0.2, "sys-c": 0.3, "sys-d": 0.4}
    judge = {"sys-a": 1.0, "sys-b": 3.0, "sys-c": 2.0, "sys-d": 4.0, "sys-e": 5.0}
    # Six pairs, only (b, c) discordant: (5 - 1) / 6.
    assert kendall_tau_systems(metric, judge) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        kendall_tau_systems({"a": 1.0}, {"a": 2.0})


def test_mae_and_exact_agreement():
    assert mae([1, 2, 3, None], [2, 2, 5, 1]) == pytest.approx(1.0)
    assert exact_agreement([1, 2, 3, None], [2, 2, 3, 1]) == pytest.approx(2 / 3)
    assert math.isnan(mae([None], [1]))
    with pytest.raises(ValueError):
        mae([1, 2], [1])


def test_ratings_matrix_from_a_judge_panel():
    def result(ok, value):
        return JudgeResult(judge_id="j", rubric="creative_quality", rubric_hash="h", ok=ok, scores={"craft": value} if ok else {})

    panel = {
        "judge-1": [result(True, 3.0), result(True, 4.0), result(False, None)],
        "judge-2": [result(True, 3.0), result(True, None), result(True, 2.0)],
    }
    raters, rows = ratings_matrix(panel, "craft")
    assert raters == ["judge-1", "judge-2"]
    assert rows == [[3.0, 4.0, None], [3.0, None, 2.0]]
