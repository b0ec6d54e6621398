"""Repeated judging (`judge_repeats`) through the one judging step, with judges whose answers are known by
construction: each repeat is its own cached request (the first the request of a judge that judges once), the verdict
is the repeats' mean, and the judge's agreement with itself is 1 for a judge that repeats itself and about 0 for one
that answers at random."""

from __future__ import annotations

import math
import statistics

from pathlib import Path

import pytest
import yaml

from narrative_eval.config import load_config
from narrative_eval.errors import UserError
from narrative_eval.judges.judge import repeat_judges
from narrative_eval.judges.resumable import JudgedItem, judge_items
from narrative_eval.judges.rubric import load_rubric
from narrative_eval.stats.judge_reliability import repeat_agreement
from narrative_eval.studies.incremental.controls import refusal_text
from narrative_eval.sweep import describe_grid

from tests.control_judges import STORIES, control_judge, shipped_tasks

REPO = Path(__file__).resolve().parents[2]
QUALITY = "creative_quality"


def _items() -> list[JudgedItem]:
    """Each of the four stories, and the refusal, under its brief: outputs a judge can tell apart."""
    tasks = {task.story_id: task for task in shipped_tasks() if task.story_id in STORIES}
    return [JudgedItem(f"{story_id}/{kind}", {"task": task.full_instruction, "requirements": list(task.constraints),
                                              "response": text})
            for story_id, task in tasks.items()
            for kind, text in (("story", STORIES[story_id]), ("refusal", refusal_text()))]


def test_a_judge_that_repeats_itself_agrees_with_itself_and_more_repeats_send_only_the_new_ones(tmp_path):
    items = _items()
    cached, judge = control_judge("control-oracle", [(STORIES[k.split("/")[0]], STORIES[k.split("/")[0]])
                                                     for k in (item.key for item in items)], refusal_text(), tmp_path)
    cached.backend.good = [(item.shown["task"], item.shown["response"]) for item in items if item.key.endswith("story")]
    once = judge_items(lambda: cached, judge, QUALITY, items)
    assert cached.generated == len(items) and all(not j.result.repeats for j in once)

    thrice = judge.model_copy(update={"repeats": 3})
    made = judge_items(lambda: cached, thrice, QUALITY, items)
    # The first repeat is the single judgment's request (answered by the cache): only two more per output are sent.
    assert cached.generated == 3 * len(items)
    assert [j.result.scores for j in made] == [j.result.scores for j in once]
    for judgment in made:
        assert len(judgment.result.repeats) == 3 and all(r == judgment.result.scores for r in judgment.result.repeats)
    agreement = repeat_agreement([j.result for j in made], load_rubric(QUALITY))
    assert agreement and all(value == 1.0 for value in agreement.values()), agreement
    assert set(agreement) == {f"{key}_self_alpha" for key in load_rubric(QUALITY).keys} | {"mean_self_alpha"}
    # A rerun sends nothing; one more repeat sends one request per output.
    judge_items(lambda: cached, thrice, QUALITY, items)
    assert cached.generated == 3 * len(items)
    judge_items(lambda: cached, judge.model_copy(update={"repeats": 4}), QUALITY, items)
    assert cached.generated == 4 * len(items)
    # Each repeat has a seed of its own; the first is the judge's.
    seeds = [repeat.seed for repeat in repeat_judges(judge.model_copy(update={"repeats": 4}))]
    assert seeds[0] == judge.seed and len(set(seeds)) == 4


def test_a_judge_that_answers_at_random_agrees_with_itself_only_by_chance():
    """500 outputs, 3 repeats: alpha within 0.05 of 0 on every dimension; each verdict is its repeats' mean."""
    cached, judge = control_judge("control-random")
    task = shipped_tasks()[0]
    items = [JudgedItem(str(index), {"task": task.full_instruction, "requirements": list(task.constraints),
                                     "response": f"Story number {index}."}) for index in range(500)]
    made = judge_items(lambda: cached, judge.model_copy(update={"repeats": 3}), QUALITY, items)
    assert cached.generated == 3 * len(items)
    agreement = repeat_agreement([j.result for j in made], load_rubric(QUALITY))
    assert all(abs(value) < 0.05 for value in agreement.values()), agreement
    first = made[0].result
    for key, value in first.scores.items():
        assert math.isclose(value, statistics.fmean(r[key] for r in first.repeats))


def test_a_judge_judged_once_logs_no_self_agreement():
    cached, judge = control_judge("control-constant")
    made = judge_items(lambda: cached, judge, QUALITY, _items())
    assert repeat_agreement([j.result for j in made], load_rubric(QUALITY)) == {}


def _config(tmp_path, judge_repeats: int, **judge):
    """A sweep config with one embedded judge (`judge`: its settings), loaded as the sweep command loads it."""
    path = tmp_path / "repeats.yaml"
    path.write_text(yaml.safe_dump({
        "study": "infilling", "sweep": "repeats", "data": str(REPO / "data/infilling/sample.jsonl"),
        "models": ["smollm2"], "prompt_settings": ["L2"], "judges": [{"id": "j", "model": "smollm2", **judge}],
        "judge_repeats": judge_repeats}))
    return load_config(path)


def test_sweep_judge_repeats_reach_every_judge_and_a_greedy_judge_that_would_repeat_itself_is_refused(tmp_path):
    assert [judge.repeats for judge in _config(tmp_path, 3, temperature=0.7).judges] == [3]
    assert [judge.repeats for judge in _config(tmp_path, 3, temperature=0.7, repeats=2).judges] == [2]
    with pytest.raises(UserError, match="greedy replies repeat bit for bit"):
        _config(tmp_path, 3)
    # Judged once, a judge's spec (and every cell's hash) is as it was before repeats existed.
    assert "repeats" not in _config(tmp_path, 1).judges[0].model_dump()
    # The dry run counts every repeat: 3 judge calls per generation.
    counts = describe_grid(_config(tmp_path, 3, temperature=0.7).model_copy(update={"limit": 2}))
    assert counts["judge_calls"] - counts["control_calls"] == 3 * counts["generations"]


def _pairs(n: int) -> list[JudgedItem]:
    """`n` pairs of distinct stories under one brief."""
    task = shipped_tasks()[0]
    return [JudgedItem(f"pair{index}", {"task": task.full_instruction, "requirements": list(task.constraints),
                                        "response_a": f"Story number {index}.", "response_b": f"Tale number {index}."})
            for index in range(n)]


def test_a_pairwise_judge_repeats_each_order_and_its_flip_rate_measures_its_self_agreement(tmp_path):
    """A pairwise judge with 3 repeats: each pair judged 3 times in each order (the first repeat the single
    judgment's cached request), each order's verdict the one most repeats gave; its flip rate is 0 for a judge that
    repeats itself and about 0.5 for one that flips a coin (500 pairs, both orders)."""
    from narrative_eval.studies.incremental.pairwise import FLIP_COLUMNS, flip_rates

    refusal = refusal_text()
    tasks = {task.story_id: task for task in shipped_tasks() if task.story_id in STORIES}
    oracle, judge = control_judge("control-oracle", [(t.full_instruction, STORIES[k]) for k, t in tasks.items()],
                                  refusal, tmp_path)
    items = [JudgedItem(k, {"task": t.full_instruction, "requirements": list(t.constraints),
                            "response_a": STORIES[k], "response_b": refusal}) for k, t in tasks.items()]
    once = judge_items(lambda: oracle, judge, "pairwise", items)
    assert oracle.generated == 2 * len(items) and all(not j.result.repeats for j in once)
    thrice = judge.model_copy(update={"repeats": 3})
    made = judge_items(lambda: oracle, thrice, "pairwise", items)
    assert oracle.generated == 2 * 3 * len(items)  # only the two new repeats of each order are sent
    assert [j.result.scores for j in made] == [j.result.scores for j in once]
    rows = [{"rater": "oracle/pairwise", **j.result.model_dump(mode="json")} for j in made]
    steady = flip_rates(rows)
    assert list(steady.columns) == FLIP_COLUMNS and set(steady["dimension"]) == set(load_rubric("pairwise").keys)
    assert steady["flip_rate"].tolist() == [0.0, 0.0] and set(steady["n_judgments"]) == {2 * len(items)}
    # Judged once, a judge has no flip rate.
    assert flip_rates([{"rater": "oracle/pairwise", **j.result.model_dump(mode="json")} for j in once]).empty

    coin, judge = control_judge("control-random")
    made = judge_items(lambda: coin, judge.model_copy(update={"repeats": 3}), "pairwise", _pairs(500))
    assert coin.generated == 2 * 3 * 500
    levels = set(load_rubric("pairwise").verdicts.values())
    for judgment in made:  # each order's verdict is its repeats' majority: a verdict the rubric allows
        for key, value in judgment.result.scores.items():
            shown = [repeat[key] for repeat in judgment.result.repeats]
            assert value in levels and (shown.count(value) >= 2 or len(set(shown)) == 3)
    flips = flip_rates([{"rater": "coin/pairwise", **j.result.model_dump(mode="json")} for j in made])
    assert all(abs(rate - 0.5) < 0.05 for rate in flips["flip_rate"]), flips
    print(flips.to_string())
