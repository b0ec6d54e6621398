"""A multi-turn report's noise table (reports.multi_turn.conversation_noise): the single-turn report's table
(judge_noise.csv) from the repeats a multi-turn sweep's judges logged on its final rows, each scorer apart."""

from __future__ import annotations

import pandas as pd
import pytest

from narrative_eval.reports.multi_turn import conversation_noise


def _finals(scorers: dict[str, float]) -> pd.DataFrame:
    """Final rows of two conditions, two stories each, one seed: every scorer's three repeats differ by 1 point times
    its scale (`scorers`: scorer -> scale), the conditions' means by 2 points times it. A non-final turn and a
    judge judged once are left out."""
    rows = [{"story_id": story, "seed": 0, "model": "m", "setting": "default", "condition": condition, "final": True,
             **{f"judge/j/{scorer}_repeat_means": [scale * (base - 1), scale * base, scale * (base + 1)]
                for scorer, scale in scorers.items()},
             "judge/once/adherence": 1.0}
            for condition, base in (("full", 2.0), ("sharded", 4.0)) for story in ("a", "b")]
    return pd.DataFrame(rows)


def test_a_judge_with_one_scorer_gets_its_noise_measured_between_conditions(tmp_path):
    tables, gaps = conversation_noise(_finals({"creative_quality": 1.0}), "story_id", tmp_path)
    noise = pd.read_csv(tmp_path / "judge_noise.csv").set_index("judge")
    assert list(tables) == ["How much of a gap each judge's noise explains"]
    # An output is a story and seed in one condition: 2 groups of 2 outputs, 3 repeats each.
    assert list(noise.index) == ["j"] and noise.loc["j", "n_outputs"] == 4 and noise.loc["j", "groups"] == 2
    assert noise.loc["j", "within_sd"] == 1.0 and noise.loc["j", "max_gap"] == 2.0
    assert gaps == {"j": pytest.approx(1.96 * (2 / 6) ** 0.5)}


def test_each_scorer_is_measured_apart_and_no_repeats_write_nothing(tmp_path):
    tables, gaps = conversation_noise(_finals({"creative_checklist": 0.25, "creative_quality": 1.0}), "story_id",
                                      tmp_path)
    noise = pd.read_csv(tmp_path / "judge_noise.csv").set_index("judge")
    assert list(noise.index) == ["j/creative_checklist", "j/creative_quality"]
    assert noise["within_sd"].tolist() == [0.25, 1.0] and noise["max_gap"].tolist() == [0.5, 2.0]
    assert gaps == {}  # one scorer's gap is not the judge's: its report card gets none
    assert conversation_noise(_finals({}), "story_id", tmp_path / "none") == ({}, {})
    assert not (tmp_path / "none" / "judge_noise.csv").exists()
