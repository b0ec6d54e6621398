"""A cell's bootstrap intervals on small generations tables whose resamples can be listed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from narrative_eval.evaluation import aggregate_seeds, seed_metrics
from narrative_eval.metrics import at_avg_names
from narrative_eval.stats.cell_scores import cell_intervals, passage_of, row_scores


def _row(instance_id: str, seed: int, value: float | None, **extra) -> dict:
    row = {"instance_id": instance_id, "seed": seed}
    if value is not None:
        row.update({name: value for name in at_avg_names()})
    row.update(extra)
    return row


def test_passage_is_the_instance_id_without_span():
    assert passage_of("news/p7/2/1") == "news/p7"
    assert passage_of("wiki/a/b/0/3") == "wiki/a/b"  # a ref_id may itself hold a slash


def test_two_passages_give_the_span_of_their_values():
    # Resamples of two passages: {x,x} {x,y} {y,x} {y,y}, each with probability 1/4, so the 2.5% and 97.5%
    # percentiles are the two values themselves.
    rows = [_row("d/p1/0/1", 0, 0.2), _row("d/p2/0/1", 0, 0.6)]
    intervals = cell_intervals(rows)
    assert intervals["at_avg_lo"] == pytest.approx(0.2) and intervals["at_avg_hi"] == pytest.approx(0.6)
    assert intervals["rouge1_lo"] == pytest.approx(0.2)


def test_instances_of_one_passage_are_drawn_together():
    # Passage p1 holds two instances (0.0 and 1.0, mean 0.5), p2 two instances at 0.5: every resample of passages
    # has mean 0.5, so the interval is the point [0.5, 0.5]; drawn as four independent instances it would not be.
    rows = [_row("d/p1/0/1", 0, 0.0), _row("d/p1/3/1", 0, 1.0), _row("d/p2/0/1", 0, 0.5), _row("d/p2/4/1", 0, 0.5)]
    intervals = cell_intervals(rows)
    assert intervals["at_avg_lo"] == pytest.approx(0.5) and intervals["at_avg_hi"] == pytest.approx(0.5)


def test_seeds_of_one_instance_stay_together():
    # Instance a: seed 0 -> 0, seed 1 -> 1; instance b: the reverse. Any resample has per-seed means m and 1-m,
    # averaging to 0.5; resampling seeds apart would spread the interval.
    rows = [_row("d/a/0/1", 0, 0.0), _row("d/a/0/1", 1, 1.0), _row("d/b/0/1", 0, 1.0), _row("d/b/0/1", 1, 0.0)]
    intervals = cell_intervals(rows)
    assert (intervals["at_avg_lo"], intervals["at_avg_hi"]) == pytest.approx((0.5, 0.5))


def test_failed_judgments_are_not_scores_and_high_pct_is_strict():
    rows = [
        _row("d/p1/0/1", 0, 0.1, **{"judge/j/status": "ok", "judge/j/fluency": 5, "judge/j/qavg": 4.0}),
        _row("d/p2/0/1", 0, 0.1, **{"judge/j/status": "ok", "judge/j/fluency": 5, "judge/j/qavg": 4.2}),
        _row("d/p3/0/1", 0, 0.1, **{"judge/j/status": "failed", "judge/j/fluency": 1, "judge/j/qavg": None}),
    ]
    scores = row_scores(pd.DataFrame(rows))
    assert np.isnan(scores["judge/j/fluency"][2])
    assert list(scores["judge/j/high_pct"][:2]) == [0.0, 100.0]  # 4.0 is not above 4
    intervals = cell_intervals(rows)
    # Only p1 and p2 were judged: their two QAvgs bound the interval; the failed p3 never counts.
    assert (intervals["judge/j/qavg_lo"], intervals["judge/j/qavg_hi"]) == pytest.approx((4.0, 4.2))
    assert (intervals["judge/j/high_pct_lo"], intervals["judge/j/high_pct_hi"]) == pytest.approx((0.0, 100.0))
    assert intervals["judge/j/fluency_lo"] == intervals["judge/j/fluency_hi"] == pytest.approx(5.0)


def test_one_passage_has_no_interval_and_wanted_limits_the_names():
    assert cell_intervals([_row("d/p1/0/1", 0, 0.3), _row("d/p1/2/1", 0, 0.4)]) == {}
    rows = [_row("d/p1/0/1", 0, 0.2), _row("d/p2/0/1", 0, 0.6)]
    assert set(cell_intervals(rows, wanted={"at_avg"})) == {"at_avg_lo", "at_avg_hi"}


def test_the_interval_is_reproducible_and_contains_the_mean():
    rng = np.random.default_rng(3)
    rows = [_row(f"d/p{i}/0/1", s, float(v)) for i in range(30) for s, v in enumerate(rng.uniform(0, 1, 2))]
    first, second = cell_intervals(rows), cell_intervals(rows)
    assert first == second
    mean = np.mean([r["rouge1"] for r in rows])
    assert first["at_avg_lo"] < mean < first["at_avg_hi"]


def test_a_multi_turn_cell_s_judge_numbers_get_intervals_drawing_its_stories():
    # An incremental cell's final-turn rows: story a scores 0.2 and 0.4 on its two seeds, story b 0.6 on both;
    # drawing stories, each resample's per-seed means average to 0.3 ({a,a}), 0.45 ({a,b}, {b,a}) or 0.6 ({b,b}).
    rows = [{"story_id": story, "seed": seed, "judge/j/adherence": value}
            for story, seed, value in [("a", 0, 0.2), ("a", 1, 0.4), ("b", 0, 0.6), ("b", 1, 0.6)]]
    summaries = {seed: {"judge/j/adherence": float(np.mean([r["judge/j/adherence"] for r in rows if r["seed"] == seed]))}
                 for seed in (0, 1)}
    metrics = aggregate_seeds(summaries, rows, [row["story_id"] for row in rows])
    assert metrics["judge/j/adherence"] == pytest.approx(0.45) and metrics["seed1/judge/j/adherence"] == pytest.approx(0.5)
    assert (metrics["judge/j/adherence_lo"], metrics["judge/j/adherence_hi"]) == pytest.approx((0.3, 0.6))
    assert aggregate_seeds(summaries, rows) == seed_metrics(summaries)  # no clusters: no intervals


def test_an_sd_across_seeds_needs_two_seeds():
    two = seed_metrics({0: {"at_avg": 0.2}, 1: {"at_avg": 0.4}})
    assert two["at_avg"] == pytest.approx(0.3) and two["at_avg_sd"] == pytest.approx(0.1414, abs=1e-4)
    one = seed_metrics({0: {"at_avg": 0.2, "chrf": float("nan")}})
    assert one == {"seed0/at_avg": 0.2, "seed0/chrf": one["seed0/chrf"], "at_avg": 0.2}  # no SD of one value
