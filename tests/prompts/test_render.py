"""Prompt files: every setting renders with its slots filled; a missing slot is refused."""

import pytest

from narrative_eval.prompts import UnfilledSlotError, fill
from narrative_eval.records import InfillingInstance
from narrative_eval.studies.infilling.prompts import render_infilling
from narrative_eval.studies.infilling.prompts import prompt_file_for

INSTANCE = InfillingInstance(
    dataset="story", ref_id="7", source_text="A. <eos> B. <eos> C.", problem="A. ______ C.",
    gold_answer="B.", n=1, unit_idx=1,
)


def test_all_levels_and_paradigms_are_defined():
    prompts = prompt_file_for("L0")  # the shipped file that defines the TELeR levels and the paradigms
    assert prompts.names("level") == ["L0", "L1", "L2", "L3", "L4"]
    assert prompts.names("paradigm") == ["abductive", "causal", "cot", "counterfactual"]
    assert len(prompts.sha256) == 64


@pytest.mark.parametrize("setting", ["L0", "L1", "L2", "L3", "L4", "abductive", "causal", "cot", "counterfactual"])
def test_every_setting_renders_without_leftover_slots(setting):
    messages = render_infilling(setting, INSTANCE)
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == "There is content that is missing from the given text. Fill in the blank."
    user = messages[1].content
    assert "A. ______ C." in user
    assert "{{" not in user and "}}" not in user
    if setting != "L0":
        assert "<ANSWER>" in user


def test_levels_state_the_sentence_count():
    assert "Fill in the blank with 1 sentences." in render_infilling("L2", INSTANCE)[1].content
    assert render_infilling("L0", INSTANCE)[1].content == "A. ______ C."


def test_missing_slot_is_refused():
    with pytest.raises(UnfilledSlotError, match="unit"):
        fill("{{problem}} at {{unit}}", {"problem": "x"})


def test_values_are_not_re_expanded():
    assert fill("{{problem}}", {"problem": "keeps {{n}} literally"}) == "keeps {{n}} literally"


def test_unknown_setting_names_the_file():
    with pytest.raises(ValueError, match="L9"):
        render_infilling("L9", INSTANCE)
