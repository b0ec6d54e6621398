"""Every judge's report card (reports.judge_card): its checks, weakest discrimination, length bias, self-agreement,
what expected scoring changes, and a verdict that follows from them."""

from __future__ import annotations

import math

from narrative_eval.reports.judge_card import judge_card, write_judge_card
from narrative_eval.stats.judge_checks import CheckRow


def row(judge: str, check: str, statistic: str, value: float, passed: bool) -> CheckRow:
    return CheckRow(judge=judge, rubric="r", check=check, statistic=statistic, n=10, n_failed=0, value=value,
                    lo=value - 0.2, hi=value + 0.1, threshold=0.8, passed=passed, gap=0.0, gap_lo=0.0, gap_hi=0.0,
                    note="")


ROWS = [row("weak", "mismatched_fill", "discrimination", 0.45, False),
        row("weak", "degenerate_fill", "discrimination", 0.6, False),
        row("weak", "padded_output", "length_bias", 0.75, False),
        row("sound", "mismatched_fill", "discrimination", 0.95, True),
        row("sound", "padded_output", "length_bias", 0.5, True),
        row("noisy", "mismatched_fill", "discrimination", 0.9, True)]


def test_each_judge_gets_its_numbers_and_a_verdict_that_follows_from_them(tmp_path):
    numbers = {"sound": {"self_alpha": 0.92, "qavg": 3.1, "expected_qavg": 3.4, "failure_rate": 0.0},
               "noisy": {"self_alpha": 0.31, "qavg": 3.0, "expected_qavg": math.nan, "failure_rate": 0.1},
               "unchecked": {"self_alpha": math.nan, "qavg": 4.0, "expected_qavg": math.nan, "failure_rate": 0.0}}
    card = judge_card(ROWS, numbers).set_index("judge")
    assert list(card.index) == ["weak", "sound", "noisy", "unchecked"]
    weak = card.loc["weak"]
    assert (weak.checks_passed, weak.checks, weak.failed_checks) == (0, 3, "mismatched_fill, degenerate_fill, padded_output")
    assert (weak.discrimination, weak.length_bias) == (0.45, 0.75)  # the weakest discrimination, the largest bias
    assert weak.verdict.startswith("do not use its scores")
    assert card.loc["sound", "expected_minus_sampled"] == 3.4 - 3.1
    assert card.loc["sound", "verdict"] == "usable: it passed its checks and agrees with itself at alpha 0.92"
    assert card.loc["noisy", "verdict"].startswith("usable with care") and math.isnan(card.loc["noisy", "length_bias"])
    assert card.loc["unchecked", "verdict"].startswith("unchecked")
    markdown = write_judge_card(ROWS, numbers, tmp_path)
    assert (tmp_path / "judge_card.csv").is_file() and "do not use its scores" in markdown
