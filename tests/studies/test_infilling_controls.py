"""The infilling study's judge controls, built from the shipped benchmark: which instances, which fills."""

from __future__ import annotations

from narrative_eval.data.instances import BLANK, domain, sentences
from narrative_eval.judges.checks import PADDED, sample_ids
from narrative_eval.studies.infilling.controls import (
    DEGENERATE,
    MISMATCHED,
    degenerate_fill,
    infilling_controls,
    mismatched_donor,
)
from tests.control_judges import shipped_instances

INSTANCES = shipped_instances()


def test_each_chosen_instance_gets_a_wrong_fill_and_a_degenerate_one_against_its_gold():
    items = infilling_controls(INSTANCES)
    by_id = {i.instance_id: i for i in INSTANCES}
    chosen = sample_ids(by_id)
    assert [item.instance_id for item in items if item.check == DEGENERATE] == chosen
    for item in items:
        instance = by_id[item.instance_id]
        # The gold fill padded with neutral filler must not score above it (length bias); the others below it.
        assert item.rubric == "infilling_narrative"
        assert item.expected == ("padded_not_above" if item.check == PADDED else "below_reference")
        assert item.reference == {"problem": instance.problem, "candidate": instance.gold_answer}
        assert item.inputs["problem"] == instance.problem and item.inputs["candidate"] != instance.gold_answer
        if item.check == MISMATCHED:
            donor = [other for other in INSTANCES if other.gold_answer == item.inputs["candidate"]]
            assert donor and all(domain(d.dataset) == domain(instance.dataset) and d.ref_id != instance.ref_id
                                 for d in donor)
    # The shipped domains all have several passages: every chosen instance has its mismatched fill.
    assert [item.instance_id for item in items if item.check == MISMATCHED] == chosen


def test_the_degenerate_fill_repeats_the_sentence_next_to_the_blank():
    for instance in INSTANCES:
        fill = degenerate_fill(instance)
        before, after = instance.problem.split(BLANK)
        if sentences(before):
            assert before.rstrip().endswith(fill)
        else:
            assert after.lstrip().startswith(fill) and instance.unit_idx == 0
        assert fill and fill in sentences(instance.source_text)


def test_controls_are_the_same_for_every_judge_and_donors_stay_as_the_data_grows():
    first = infilling_controls(INSTANCES, 8)
    again = infilling_controls(INSTANCES, 8, rubric="my_rubric")
    assert [(i.check, i.instance_id, dict(i.inputs)) for i in first] == [
        (i.check, i.instance_id, dict(i.inputs)) for i in again]
    assert {i.rubric for i in again} == {"my_rubric"}
    part = INSTANCES[: len(INSTANCES) // 2]
    for instance in part:
        donor = mismatched_donor(instance, INSTANCES)
        if donor is not None and donor in part:
            assert mismatched_donor(instance, part) == donor
