"""The length-bias control check: an output against itself padded with about 30% neutral filler. A judge that
scores by length fails it; a judge that ties them, or prefers the output, passes."""

from __future__ import annotations

import pytest

from narrative_eval.data.instances import sentences
from narrative_eval.judges.checks import PADDED, PADDING_SHARE, ControlJudgment, filler_sentences, padded_text
from narrative_eval.records import JudgeResult
from narrative_eval.stats.judge_checks import check_rows
from narrative_eval.studies.infilling.controls import infilling_controls
from tests.control_judges import STORIES, shipped_instances


def test_padding_adds_a_third_more_words_of_filler_around_the_output_in_its_order():
    filler = set(filler_sentences())
    for key, story in STORIES.items():
        padded = padded_text(story, 0, key)
        assert padded == padded_text(story, 0, key) != padded_text(story, 1, key)  # seeded, like the shuffled controls
        assert len(padded.split()) >= (1 + PADDING_SHARE) * len(story.split())
        kept = [s for s in sentences(padded) if s not in filler]
        assert kept == sentences(story) and sentences(padded)[0] == sentences(story)[0]
    assert padded_text("   ", 0, "empty") is None


def judged_by(score, items) -> list[ControlJudgment]:
    """Every padded control judged by `score(candidate)`: a judge whose rule is known."""
    def result(rubric: str, inputs) -> JudgeResult:
        return JudgeResult(judge_id="judge", rubric=rubric, rubric_hash="x", ok=True,
                           scores={"quality": float(score(inputs["candidate"]))})
    return [ControlJudgment(item, result(item.rubric, item.inputs), result(item.rubric, item.reference)) for item in items]


@pytest.fixture(scope="module")
def padded_items():
    items = [item for item in infilling_controls(shipped_instances(), 20) if item.check == PADDED]
    assert len(items) == 20
    return items


def test_an_always_longer_judge_fails_the_length_check(padded_items):
    [row] = check_rows("judge", judged_by(lambda text: len(text.split()), padded_items))
    assert (row.check, row.statistic, row.value, row.n) == (PADDED, "length_bias", 1.0, 20)
    assert not row.passed and row.lo > 0.5 and "above 0.6" in row.note and "padding wins" in row.note
    assert row.gap > 0


@pytest.mark.parametrize("score, value", [(lambda text: 3, 0.5), (lambda text: -len(text), 0.0)])
def test_a_judge_that_ties_or_prefers_the_output_passes(padded_items, score, value):
    [row] = check_rows("judge", judged_by(score, padded_items))
    assert row.value == value and row.passed and row.note == ""
