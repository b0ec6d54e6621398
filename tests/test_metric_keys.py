"""The metric-key vocabulary (records.keys): what it makes, it parses back, and other keys are not taken for it."""

from __future__ import annotations

from narrative_eval.records.keys import (interval_keys, is_spread, judge_key, judges_logging, metric_column,
                                         parse_judge_key, parse_seed_key, sd_key, seed_key, seeded, with_interval)


def test_keys_are_made_and_parsed_back():
    assert judge_key("smollm2-judge", "qavg") == "judge/smollm2-judge/qavg"
    assert parse_judge_key(judge_key("smollm2-judge", "qavg")) == ("smollm2-judge", "qavg")
    assert seed_key(3, "judge/j/qavg") == "seed3/judge/j/qavg" and parse_seed_key("seed3/judge/j/qavg") == (3, "judge/j/qavg")
    assert sd_key("at_avg") == "at_avg_sd" and interval_keys("at_avg") == ("at_avg_lo", "at_avg_hi")


def test_other_keys_are_not_parsed_as_judge_or_seed_keys():
    assert parse_judge_key("at_avg") is None and parse_judge_key("judge/j") is None
    assert parse_judge_key("seed0/judge/j/qavg") is None and parse_seed_key("seeds/at_avg") is None


def test_run_columns_seeded_keys_and_spreads():
    assert metric_column(judge_key("j", "qavg")) == "metrics.judge/j/qavg"
    columns = ["metrics.judge/b/qavg", "metrics.judge/a/qavg", "metrics.judge/c/ci", "at_avg"]
    assert judges_logging(columns, "qavg") == ["a", "b"]
    assert seeded("news/p1/0/1", 2) == "news/p1/0/1/seed2" and with_interval("icir") == ("icir", "icir_lo", "icir_hi")
    assert is_spread("at_avg_sd") and is_spread("at_avg_lo") and not is_spread("at_avg")
