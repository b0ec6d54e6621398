"""Judging a declared set of items resumably (judges.resumable) through a registered judge behind the request cache
whose answers are known by construction: batches of the backend's size, both presentation orders of a pair, a call
back after each batch, and a rerun that judges only what is missing or changed."""

from __future__ import annotations

import pytest

from narrative_eval.judges.resumable import AS_GIVEN, JudgedItem, judge_items, presentation_orders
from narrative_eval.judges.rubric import load_rubric
from narrative_eval.studies.incremental.controls import refusal_text

from tests.control_judges import STORIES, control_judge, shipped_tasks

ORDERS = ("primary", "reversed")


@pytest.fixture(scope="module")
def briefs():
    return {task.story_id: task for task in shipped_tasks() if task.story_id in STORIES}


def pairs(briefs, refusal: str) -> list[JudgedItem]:
    """Each story (A) against the refusal (B) under its own brief."""
    return [JudgedItem(story_id, {"task": task.full_instruction, "requirements": list(task.constraints),
                                  "response_a": STORIES[story_id], "response_b": refusal})
            for story_id, task in briefs.items()]


def test_pairs_are_judged_in_both_orders_in_batches_and_a_rerun_judges_only_what_changed(briefs, tmp_path):
    refusal = refusal_text()
    cached, judge = control_judge("control-oracle", [(t.full_instruction, STORIES[k]) for k, t in briefs.items()],
                                  refusal, tmp_path)
    cached.backend.batch_size = 3  # an engine that takes 3 requests at a time: 4 pairs make 2 batches
    items = pairs(briefs, refusal)
    batches = []
    made = judge_items(lambda: cached, judge, "pairwise", items, orders=ORDERS, after_batch=batches.append)
    assert [(j.key, j.order) for j in made] == [(item.key, order) for item in items for order in ORDERS]
    assert [len(batch) for batch in batches] == [2 * 3, 2 * 1] and sum(batches, []) == made
    assert cached.generated == 2 * len(items)
    # The oracle prefers the story wherever it is shown: A as declared, B when swapped (verdicts as shown).
    for judgment in made:
        assert judgment.result.ok and judgment.result.judge_id == judge.id
        assert {v > 0 for v in judgment.result.scores.values()} == {judgment.order == "primary"}

    # Everything held and unchanged: nothing judged, and no backend even asked for.
    valid = {(j.key, j.order): j.digest for j in made}
    asked = []
    assert judge_items(lambda: asked.append(1), judge, "pairwise", items, valid, ORDERS) == [] and asked == []
    # A judgment missing in one order, or a changed text, is judged again: that item alone, in both orders.
    changed = [items[0], JudgedItem(items[1].key, {**items[1].shown, "response_b": "No."}), *items[2:]]
    missing = {key: digest for key, digest in valid.items() if key != (items[2].key, "reversed")}
    again = judge_items(lambda: cached, judge, "pairwise", changed, missing, ORDERS)
    assert [(j.key, j.order) for j in again] == [(items[k].key, order) for k in (1, 2) for order in ORDERS]
    assert again[2].digest == valid[(items[2].key, "primary")] != again[0].digest
    # Another judge setting is another digest: every item judged again.
    longer = judge.model_copy(update={"max_new_tokens": judge.max_new_tokens + 1})
    assert len(judge_items(lambda: cached, longer, "pairwise", items, valid, ORDERS)) == 2 * len(items)


def test_a_scores_rubric_is_judged_once_per_item_as_given(briefs):
    cached, judge = control_judge("control-constant")
    items = [JudgedItem(story_id, {"task": task.full_instruction, "requirements": list(task.constraints),
                                   "response": STORIES[story_id]}) for story_id, task in briefs.items()]
    made = judge_items(lambda: cached, judge, "creative_quality", items)
    assert [(j.key, j.order) for j in made] == [(item.key, AS_GIVEN) for item in items]
    assert all(j.result.ok for j in made) and cached.generated == len(items)
    with pytest.raises(ValueError, match="judged in 1 presentation order"):
        presentation_orders(load_rubric("creative_quality"), ORDERS)
    assert presentation_orders(load_rubric("pairwise")) == ("forward", "reversed")


def test_items_under_their_own_rubrics_are_judged_in_one_call_in_item_order(briefs):
    """A multi-turn cell's scorers: each final reply under the checklist and the quality rubric, side by side in one
    call; each verdict is that rubric's (its own dimensions), in the order the items were given."""
    cached, judge = control_judge("control-constant")
    cached.backend.batch_size = 3  # batches that mix the two rubrics
    items = [JudgedItem(f"{story_id}/{rubric}", {"task": task.full_instruction, "requirements": list(task.constraints),
                                                 "response": STORIES[story_id]}, rubric)
             for story_id, task in briefs.items() for rubric in ("creative_checklist", "creative_quality")]
    made = judge_items(lambda: cached, judge, "creative_quality", items)
    assert [j.key for j in made] == [item.key for item in items] and cached.generated == len(items)
    quality = set(load_rubric("creative_quality").keys)
    for item, judgment in zip(items, made, strict=True):
        assert judgment.result.ok and judgment.result.rubric == item.rubric
        assert (set(judgment.result.scores) == quality) == (item.rubric == "creative_quality")
    # A pairwise rubric is judged in two orders: it cannot share a call with a pointwise one.
    with pytest.raises(ValueError, match="other presentation orders"):
        judge_items(lambda: cached, judge, "creative_quality", [JudgedItem("pair", {}, "pairwise")])


def test_every_verdict_goes_through_the_one_judging_step():
    """The judge engine (judges.judge's judge_many and judge_pairwise_orders) is called by the judging step alone:
    no study, example, multi-turn loop or report asks a judge another way."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    engine = re.compile(r"\b(judge_many|judge_pairwise_orders)\(")
    allowed = {root / "platform/narrative_eval/judges/judge.py", root / "platform/narrative_eval/judges/resumable.py"}
    callers = [f"{path.relative_to(root)}:{number}"
               for folder in ("platform", "examples", "experiments", "ui")
               for path in sorted((root / folder).rglob("*.py")) if path not in allowed
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if engine.search(line) and not line.lstrip().startswith(("def ", "#"))]
    assert callers == []
