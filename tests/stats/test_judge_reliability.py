"""Judge reliability statistics on judges whose answer is known by construction: a deterministic judge agrees with
itself perfectly, a random one not at all; a judge that rewards only length has a length-controlled win rate of a
half on pairs of equal quality; a jury weighted by control checks is not fooled by an adversarial member."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.jury_simulation import simulate
from narrative_eval.stats.judge_reliability import (
    flip_rate,
    jury_scores,
    length_controlled_win_rate,
    member_weights,
    noise_table,
    self_agreement,
    self_agreement_by_dimension,
)

ITEMS = 500


def test_a_deterministic_judge_agrees_with_itself_completely():
    quality = np.random.default_rng(0).integers(1, 6, ITEMS)
    assert self_agreement(np.column_stack([quality] * 3)) == 1.0
    frame = pd.DataFrame([{"item": i, "repeat": r, "dimension": d, "score": float(quality[i] if d == "a" else 6 - quality[i])}
                          for i in range(50) for r in range(2) for d in ("a", "b")])
    assert self_agreement_by_dimension(frame) == {"a": 1.0, "b": 1.0}


def test_a_judge_that_answers_at_random_has_alpha_near_zero():
    scores = np.random.default_rng(1).integers(1, 6, (ITEMS, 3)).astype(float)
    assert abs(self_agreement(scores)) < 0.05


def test_the_flip_rate_of_steady_and_random_pairwise_judges():
    rng = np.random.default_rng(2)
    steady = np.repeat(rng.choice([-2.0, 0.0, 1.0], ITEMS)[:, None], 3, axis=1)
    assert flip_rate(steady) == 0.0
    # Three directions equally likely: two repeats differ two times in three.
    assert flip_rate(rng.choice([-1.0, 0.0, 1.0], (ITEMS, 2))) == pytest.approx(2 / 3, abs=0.05)


def pairs_of_equal_quality(seed: int = 0, n: int = 1000) -> tuple[np.random.Generator, np.ndarray]:
    """Length differences (A minus B) of pairs where A is the longer one 70% of the time."""
    rng = np.random.default_rng(seed)
    return rng, np.where(rng.random(n) < 0.7, 1, -1) * rng.uniform(10, 200, n)


def test_an_always_longer_judge_has_a_length_controlled_win_rate_of_a_half():
    _, difference = pairs_of_equal_quality()
    result = length_controlled_win_rate((difference > 0).astype(float), difference, n_boot=200)
    assert result.raw == pytest.approx(0.7, abs=0.03)
    assert result.lc == pytest.approx(0.5, abs=0.05)
    assert result.lo < 0.5 < result.hi and result.length_slope > 5


def test_a_length_driven_judge_is_corrected_and_a_quality_driven_one_is_left_alone():
    rng, difference = pairs_of_equal_quality(seed=3)
    prefers_longer = 1 / (1 + np.exp(-3 * np.tanh(difference / difference.std())))
    result = length_controlled_win_rate((rng.random(difference.size) < prefers_longer).astype(float), difference, n_boot=200)
    assert result.raw > 0.6 and result.lc == pytest.approx(0.5, abs=0.05)
    better = (rng.random(difference.size) < 0.7).astype(float)  # A truly better 70% of the time, length irrelevant
    result = length_controlled_win_rate(better, difference, n_boot=200)
    assert result.lc == pytest.approx(result.raw, abs=0.02) and result.lo < result.raw < result.hi


def test_jury_aggregates_and_weights():
    scores = pd.DataFrame({"a": [1.0, 4.0, 5.0], "b": [2.0, 4.0, np.nan], "c": [2.0, 1.0, 1.0]})
    assert jury_scores(scores, "mean")[0].tolist() == pytest.approx([5 / 3, 3.0, 3.0])
    assert jury_scores(scores, "median")[0].tolist() == [2.0, 4.0, 3.0]
    assert jury_scores(scores, "majority")[0].tolist() == [2.0, 4.0, 3.0]
    weights = member_weights({"a": 1.0, "b": 0.75, "c": 0.2})
    assert weights == pytest.approx({"a": 2 / 3, "b": 1 / 3, "c": 0.0})
    combined, used = jury_scores(scores, "weighted", weights)
    assert used == weights and combined.tolist() == pytest.approx([4 / 3, 4.0, 5.0])  # b's gap: a alone on row 3
    with pytest.raises(ValueError, match="above chance"):
        member_weights({"a": 0.5, "b": 0.3})


def test_a_weighted_jury_beats_the_mean_when_one_judge_is_adversarial():
    runs = simulate(runs=1000, outputs=60, controls=20, seed=0)
    # The adversarial member drags the plain mean down; its control checks give it no weight.
    assert (runs["weighted"] >= runs["mean"]).all()
    assert runs["weighted"].mean() > runs["mean"].mean() + 0.2
    assert runs["weighted"].mean() == pytest.approx(runs["best single"].mean(), abs=0.02)


def test_the_noise_table_finds_the_judges_spread_and_the_gaps_it_explains():
    rng = np.random.default_rng(4)
    rows = []
    for group, shift in (("m1", 0.0), ("m2", 0.05), ("m3", 1.0)):
        for output in range(100):
            quality = rng.normal(3 + shift, 0.5)
            rows += [{"judge": "j", "group": group, "output": f"{group}/{output}", "repeat": r,
                      "score": quality + rng.normal(0, 0.8)} for r in range(3)]
    [row] = noise_table(pd.DataFrame(rows)).to_dict("records")
    assert row["within_sd"] == pytest.approx(0.8, abs=0.05)
    assert row["groups"] == 3 and row["repeats"] == 3 and row["n_outputs"] == 300
    # m1 vs m2 (0.05 apart) is within the judge's noise; the gaps to m3 are not.
    assert row["min_gap"] < row["noise_gap"] < row["max_gap"] and row["gaps_within_noise"] == pytest.approx(1 / 3)
