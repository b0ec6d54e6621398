"""Every judge's report card (reports.judge_card): its checks, weakest discrimination, length bias, self-agreement,
what expected scoring changes, and a verdict that follows from them."""

from __future__ import annotations

import math

import pytest

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


def test_the_noise_table_reads_each_repeats_mean_score_from_the_generations_rows(tmp_path):
    """Two settings, two outputs each, three repeats: an output's repeats differ by 1 point (SD 1), the settings'
    means by 2 points; the noise gap is 1.96 x 1 x sqrt(2 / (2 x 3)) = 1.13, so that gap is beyond it."""
    import pandas as pd

    from narrative_eval.reports.judge_card import write_judge_noise

    rows = pd.DataFrame([{"model": "m", "setting": setting, "instance_id": item, "seed": 0,
                          "judge/j/repeat_means": [base - 1, base, base + 1], "judge/k/qavg": 3.0}
                         for setting, base in (("L1", 2.0), ("L2", 4.0)) for item in ("a", "b")])
    markdown, gaps = write_judge_noise(rows, "instance_id", tmp_path)
    noise = pd.read_csv(tmp_path / "judge_noise.csv").set_index("judge")
    assert list(noise.index) == ["j"] and noise.loc["j", "within_sd"] == 1.0
    assert gaps["j"] == pytest.approx(1.96 * (2 / 6) ** 0.5) and noise.loc["j", "noise_gap"] == pytest.approx(gaps["j"], abs=1e-6)
    assert noise.loc["j", "max_gap"] == 2.0 and noise.loc["j", "gaps_within_noise"] == 0.0
    # Without repeats there is nothing to write.
    assert write_judge_noise(rows.drop(columns=["judge/j/repeat_means"]), "instance_id", tmp_path / "none") == ("", {})
