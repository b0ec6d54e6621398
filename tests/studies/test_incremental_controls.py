"""The incremental-delivery study's judge controls, built from the shipped tasks and stories written for them."""

from __future__ import annotations

import pytest

from narrative_eval.data.instances import sentences
from narrative_eval.judges.checks import padded_text, shuffled_sentences
from narrative_eval.studies.incremental.controls import (
    checklist_controls,
    incremental_controls,
    pairwise_controls,
    quality_controls,
    refusal_text,
)
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, PAIRWISE_EVIDENCE_RUBRIC, QUALITY_RUBRIC
from tests.control_judges import STORIES, shipped_tasks

TASKS = shipped_tasks()


def test_the_refusal_comes_from_the_data_file(tmp_path):
    assert refusal_text() == "I can't write that story."
    (tmp_path / "texts.yaml").write_text("refusal: ''\n")
    with pytest.raises(ValueError, match="texts.yaml: needs a non-empty `refusal`"):
        refusal_text(tmp_path / "texts.yaml")


def test_checklist_controls_hold_a_refusal_and_another_tasks_story_against_the_tasks_requirements():
    by_id = {task.story_id: task for task in TASKS}
    items = checklist_controls(TASKS, STORIES)
    assert sorted({i.instance_id for i in items}) == sorted(STORIES)  # only tasks with a story; fewer than K
    for item in items:
        task = by_id[item.instance_id]
        assert item.rubric == CHECKLIST_RUBRIC
        assert item.inputs["task"] == task.full_instruction and item.inputs["requirements"] == list(task.constraints)
        if item.check == "refusal":
            assert item.expected == "near_zero" and item.inputs["response"] == refusal_text()
        else:
            assert item.check == "other_task_story" and item.expected == "below_reference"
            assert item.inputs["response"] in STORIES.values() and item.inputs["response"] != STORIES[task.story_id]
            assert item.reference["response"] == STORIES[task.story_id]
    assert len(checklist_controls(TASKS, STORIES, k=2)) == 4
    assert checklist_controls(TASKS, {"fantasy_001": STORIES["fantasy_001"], "comedy_001": " "}) == [
        i for i in checklist_controls(TASKS, {"fantasy_001": STORIES["fantasy_001"]}) if i.check == "refusal"]


def test_shuffled_stories_keep_every_sentence_in_another_seeded_order():
    items = [i for i in quality_controls(TASKS, STORIES, seed=3) if i.check == "shuffled_sentences"]
    assert len(items) == len(STORIES) and {i.rubric for i in items} == {QUALITY_RUBRIC}
    for item in items:
        story = STORIES[item.instance_id]
        shuffled = item.inputs["response"]
        assert shuffled != story and sorted(sentences(shuffled)) == sorted(sentences(story))
        assert shuffled == shuffled_sentences(story, 3, item.instance_id)  # seeded by the story id
        assert item.reference["response"] == story
    assert {i.inputs["response"] for i in quality_controls(TASKS, STORIES, seed=4)} != {
        i.inputs["response"] for i in items}


def test_padded_stories_add_neutral_filler_and_must_not_score_above_the_story():
    padded = [i for i in quality_controls(TASKS, STORIES, seed=3) if i.check == "padded_output"]
    assert len(padded) == len(STORIES)
    for item in padded:
        story = STORIES[item.instance_id]
        assert item.expected == "padded_not_above" and item.reference["response"] == story
        assert item.inputs["response"] == padded_text(story, 3, item.instance_id)
        assert len(item.inputs["response"].split()) >= 1.3 * len(story.split())
    pairs = [i for i in pairwise_controls(TASKS, STORIES) if i.check == "padded_output"]
    assert [(i.expected, i.inputs["response_a"]) for i in pairs] == [
        ("padded_not_preferred", STORIES[i.instance_id]) for i in pairs] and len(pairs) == len(STORIES)


def test_pairwise_controls_pair_a_story_with_itself_and_with_the_refusal():
    items = [i for i in pairwise_controls(TASKS, STORIES, rubric=PAIRWISE_EVIDENCE_RUBRIC) if i.check != "padded_output"]
    assert len(items) == 2 * len(STORIES) and {i.rubric for i in items} == {PAIRWISE_EVIDENCE_RUBRIC}
    for item in items:
        story = STORIES[item.instance_id]
        assert item.inputs["response_a"] == story
        if item.check == "identical_pair":
            assert item.expected == "tie" and item.inputs["response_b"] == story
        else:
            assert item.expected == "a_preferred" and item.inputs["response_b"] == refusal_text()


def test_one_judge_gets_every_check_of_the_study():
    items = incremental_controls(TASKS, STORIES, 3, quality_rubric="my_quality", pairwise_rubrics=("pairwise",))
    assert {(i.rubric, i.check) for i in items} == {
        (CHECKLIST_RUBRIC, "refusal"), (CHECKLIST_RUBRIC, "other_task_story"), ("my_quality", "shuffled_sentences"),
        ("my_quality", "padded_output"), ("pairwise", "identical_pair"), ("pairwise", "refusal_pair"),
        ("pairwise", "padded_output")}
    assert len({i.instance_id for i in items}) == 3
