"""The names a check goes by in MLflow: metrics and verdict tags from check rows, a check two rubrics share kept apart."""

from __future__ import annotations

import math

from narrative_eval.stats.judge_checks import (CheckRow, check_labels, check_metrics, failed_in_tags, failing_judges,
                                               verdict_tags)


def row(judge: str, rubric: str, check: str, passed: bool, value: float = 0.5) -> CheckRow:
    return CheckRow(judge, rubric, check, "discrimination", 20, 0, value, value - 0.1, value + 0.1, 0.8, passed,
                    math.nan, math.nan, math.nan, "" if passed else "below 0.8")


ROWS = [
    row("a", "creative_checklist", "refusal", True, 0.0),
    row("a", "pairwise", "identical_pair", False),
    row("a", "pairwise", "position_bias", False, 1.0),
    row("a", "pairwise_evidence", "identical_pair", True, 0.9),
    row("a", "pairwise_evidence", "position_bias", False, 0.9),
    row("b", "pairwise", "position_bias", True),
]


def test_a_check_two_rubrics_share_is_named_with_its_rubric():
    assert check_labels(ROWS) == ["refusal", "pairwise/identical_pair", "pairwise/position_bias",
                                  "pairwise_evidence/identical_pair", "pairwise_evidence/position_bias", "position_bias"]


def test_metrics_carry_the_value_its_interval_and_the_verdict():
    metrics = check_metrics(ROWS)
    assert metrics["judge_check/a/refusal"] == 0.0 and metrics["judge_check/a/refusal_pass"] == 1.0
    assert metrics["judge_check/a/pairwise/position_bias"] == 1.0
    assert metrics["judge_check/a/pairwise/position_bias_lo"] == 0.9 and metrics["judge_check/a/pairwise/position_bias_hi"] == 1.1
    assert metrics["judge_check/b/position_bias_pass"] == 1.0 and len(metrics) == 4 * len(ROWS)


def test_the_tag_says_pass_or_lists_the_failed_checks():
    assert failing_judges(ROWS) == {"a": ["pairwise/identical_pair", "pairwise/position_bias",
                                          "pairwise_evidence/position_bias"]}
    assert verdict_tags(ROWS) == {
        "judge_check/a": "fail: pairwise/identical_pair, pairwise/position_bias, pairwise_evidence/position_bias",
        "judge_check/b": "pass"}


def test_the_failed_checks_read_back_from_the_tags_are_those_written():
    tags = {**verdict_tags(ROWS), "narrative_eval.sweep": "s"}
    assert failed_in_tags(tags) == {"a": ["pairwise/identical_pair", "pairwise/position_bias",
                                          "pairwise_evidence/position_bias"]}  # b passed: absent
