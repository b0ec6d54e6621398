"""PPI++, stratified (active) PPI and the rating plan (stats.ppi, stats.rate_next, stats.rating_plan): coverage by
simulation with a fixed rating budget, the tuned weight, the rate-next design, and the plan's width against the
width reached (figures: bench/ppi_plan.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narrative_eval.stats.ppi import human_anchored_mean, stratified_mean
from narrative_eval.stats.rate_next import rate_next_order, uncertainty_strata
from narrative_eval.stats.rating_plan import rating_plan

RUNS, N_OUTPUTS, BUDGET = 1000, 400, 60
TRUE_MEAN, JUDGE_BIAS, QUALITY_SD, HUMAN_NOISE_SD = 3.0, 0.5, 0.8, 0.4


def simulated_cells(rng: np.random.Generator, runs: int = RUNS, n: int = N_OUTPUTS):
    """Quality q, the judge's uncertainty s (its spread across repeated judging, known before rating: 0.1 on 70% of
    the outputs, 1.5 on the rest), its score q + bias + N(0, s), and people's rating q + N(0, 0.4), one row per run.
    The mean of people's rating is 3."""
    quality = rng.normal(TRUE_MEAN, QUALITY_SD, (runs, n))
    spread = np.where(rng.random((runs, n)) < 0.7, 0.1, 1.5)
    judge = quality + JUDGE_BIAS + rng.normal(0.0, 1.0, (runs, n)) * spread
    human = quality + rng.normal(0.0, HUMAN_NOISE_SD, (runs, n))
    return judge, human, spread


def rated_next(uncertainty: np.ndarray, human: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """People's ratings of the first BUDGET outputs of the rate-next order (NaN elsewhere), and the strata."""
    order = rate_next_order(uncertainty, BUDGET, seed)
    rated = np.full(human.size, np.nan)
    first = order["position"].to_numpy()[:BUDGET]
    rated[first] = human[first]
    strata = np.empty(human.size, dtype=int)
    strata[order["position"].to_numpy()] = order["stratum"].to_numpy()
    return rated, strata


def test_every_estimator_covers_the_true_mean_with_a_fixed_budget():
    rng = np.random.default_rng(20250107)
    judge, human, spread = simulated_cells(rng)
    uniform = np.where(np.arange(N_OUTPUTS) < BUDGET, human, np.nan)  # outputs are exchangeable: the first 60
    fixed = [human_anchored_mean(j, h) for j, h in zip(judge, uniform)]
    active = [stratified_mean(j, *rated_next(s, h, seed)) for seed, (j, h, s) in enumerate(zip(judge, human, spread))]
    intervals = {"human": [e.human for e in fixed], "ppi": [e.ppi for e in fixed],
                 "ppi_tuned": [e.ppi_tuned for e in fixed], "active": [e.estimate for e in active]}
    coverage = {name: np.mean([i.lo <= TRUE_MEAN <= i.hi for i in found]) for name, found in intervals.items()}
    width = {name: np.mean([i.hi - i.lo for i in found]) for name, found in intervals.items()}
    assert all(0.93 <= c <= 0.975 for c in coverage.values()), coverage
    assert {e.n_rated for e in active} == {BUDGET}  # the same budget
    # A judge this noisy on 30% of the outputs makes plain PPI no narrower than people alone; PPI++ leans on it
    # only as far as it helps; rating where the judge is least certain narrows the interval further.
    assert width["ppi_tuned"] < 0.85 * min(width["ppi"], width["human"])
    assert width["active"] < 0.9 * width["ppi_tuned"], width
    assert np.mean([i.mean for i in intervals["active"]]) == pytest.approx(TRUE_MEAN, abs=0.01)


def test_the_tuned_interval_is_the_narrowest_of_its_family():
    rng = np.random.default_rng(3)
    for trial in range(40):
        quality = rng.normal(3, 1, 80)
        scale = [0.2, 1.0, 2.0][trial % 3]  # a judge on a compressed, the same, or a stretched scale
        judge = 3 + scale * (quality - 3) + rng.normal(0, 0.5 + trial / 40, 80)
        human = np.where(np.arange(80) < 25, quality + rng.normal(0, 0.3, 80), np.nan)
        result = human_anchored_mean(judge, human, np.repeat(np.arange(40), 2))
        tuned = result.ppi_tuned.hi - result.ppi_tuned.lo
        # lambda = 1 is plain PPI and lambda = 0 the human-only mean: the minimiser is at most either.
        assert tuned <= min(result.ppi.hi - result.ppi.lo, result.human.hi - result.human.lo) + 1e-12
        assert sum(result.tuned_variance) == pytest.approx((tuned / 2 / 1.959963984540054) ** 2)
    # A judge that scores on a fifth of people's scale earns a weight near 5 (its spread is a fifth of theirs).
    quality = rng.normal(3, 1, 2000)
    compressed = human_anchored_mean(3 + 0.2 * (quality - 3), np.where(np.arange(2000) < 200, quality, np.nan))
    assert compressed.tuning == pytest.approx(5.0, rel=0.02)
    every = human_anchored_mean([1.0, 2.0, 3.0], [1.0, 3.0, 2.0])  # every output rated: nothing to tune
    assert math.isnan(every.tuning) and "nothing" not in every.reason and "no weight to tune" in every.reason


def test_the_rate_next_design_and_the_stratified_estimate_by_hand():
    uncertainty = np.array([0.1, 0.1, 0.2, 0.2, 0.9, 1.0, 1.1, 1.2, np.nan])
    assert uncertainty_strata(uncertainty).tolist() == [0, 0, 0, 0, 1, 2, 2, 2, 1]
    order = rate_next_order(uncertainty, budget=4, seed=1)
    assert sorted(order["position"]) == list(range(9))  # every output, each once
    # Shares of N_h (u_h + u), u = 0.6: stratum 0 4 x 0.75, stratum 1 2 x 1.5, stratum 2 3 x 1.7; 4 ratings
    # rounded: 1, 1, 2, each raised to two (a stratum's interval needs two ratings).
    planned = order.drop_duplicates("stratum").set_index("stratum")
    assert planned["planned"].to_dict() == {0: 2, 1: 2, 2: 2}
    assert planned["probability"].to_dict() == {0: 2 / 4, 1: 2 / 2, 2: 2 / 3}
    assert sorted(order["stratum"][:6]) == [0, 0, 1, 1, 2, 2]  # the first six ratings follow the plan
    # Two strata of four outputs, every output rated in the second: its human mean, weighted by 4/8.
    f = np.array([1.0, 2.0, 3.0, 4.0, 2.0, 2.0, 3.0, 5.0])
    y = np.array([2.0, 3.0, math.nan, math.nan, 1.0, 2.0, 4.0, 5.0])
    result = stratified_mean(f, y, [0, 0, 0, 0, 1, 1, 1, 1])
    first = human_anchored_mean(f[:4], y[:4])
    assert result.estimate.mean == pytest.approx(0.5 * first.ppi_tuned.mean + 0.5 * 3.0)
    second_var = np.var([1.0, 2.0, 4.0, 5.0], ddof=1) / 4
    half = 1.959963984540054 * math.sqrt(0.25 * ((first.ppi_tuned.hi - first.ppi_tuned.lo) / 3.919927969080108) ** 2
                                         + 0.25 * second_var)
    assert result.estimate.hi - result.estimate.mean == pytest.approx(half)
    empty = stratified_mean(f, np.where(np.arange(8) < 4, y, np.nan), [0, 0, 0, 0, 1, 1, 1, 1])
    assert math.isnan(empty.estimate.mean) and "stratum 1: no rated output" in empty.reason


def test_the_plan_predicts_the_width_reached():
    """Plan from a pilot of 40 ratings among 800 outputs, rate as many as planned, and compare widths."""
    rng = np.random.default_rng(11)
    judge, human, _ = simulated_cells(rng, runs=1, n=800)
    judge, human = judge[0], human[0]
    pilot = np.where(np.arange(800) < 40, human, np.nan)
    target = 0.25
    plan = rating_plan(judge, pilot, target)
    assert plan.n_rated == 40 and 40 < plan.ppi_needed < plan.human_needed < 800
    assert plan.width > target and plan.judge_bias == pytest.approx(JUDGE_BIAS, abs=0.25)
    reached = []
    for repeat in range(200):  # new ratings of the planned number of outputs, drawn like the pilot's
        order = rng.permutation(800)
        rated = np.full(800, np.nan)
        rated[order[: int(plan.ppi_needed)]] = human[order[: int(plan.ppi_needed)]]
        result = human_anchored_mean(judge, rated)
        reached.append(result.ppi_tuned.hi - result.ppi_tuned.lo)
    assert np.mean(reached) == pytest.approx(target, rel=0.12)
    # A target narrower than the judge's own spread over the outputs allows: no number of ratings reaches it.
    hopeless = rating_plan(judge, pilot, 0.01)
    assert math.isnan(hopeless.ppi_needed) and "cannot reach" in hopeless.reason
    with pytest.raises(ValueError, match="positive"):
        rating_plan(judge, pilot, 0.0)
