"""Rubric files: versioned, hashed, rendered with every slot filled, and blind to who wrote what."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml

from narrative_eval.judges import (
    answer_schema,
    available_rubrics,
    load_rubric,
    render_item,
    rubric_hash,
)
from narrative_eval.judges.rubric import RUBRICS, RubricError, rubric_path
from narrative_eval.prompts.render import UnfilledSlotError, fill, slots

from .conftest import CANDIDATE, PROBLEM, REQUIREMENTS, STORY_A, STORY_B, TASK

SHIPPED = ["creative_checklist", "creative_quality", "infilling_narrative", "pairwise", "pairwise_evidence"]

# Facts about the generation that a judge must never see.
FORBIDDEN = ["qwen2.5-7b-secret", "sharded", "snowball", "L2", "seed-98765", "98765", "recap"]


def surrounding_record(**texts) -> dict:
    """A record as a pipeline holds it: the judged texts plus generation facts the judge must not see."""
    return {
        **texts,
        "model": "qwen2.5-7b-secret",
        "model_id": "qwen2.5-7b-secret",
        "condition": "sharded",
        "delivery": "snowball",
        "prompt_setting": "L2",
        "level": "L2",
        "seed": 98765,
        "run_name": "qwen2.5-7b-secret/L2/recap/seed-98765",
    }


RECORDS = {
    "infilling_narrative": surrounding_record(problem=PROBLEM, candidate=CANDIDATE),
    "creative_checklist": surrounding_record(task=TASK, requirements=list(REQUIREMENTS), response=STORY_A),
    "creative_quality": surrounding_record(task=TASK, requirements=list(REQUIREMENTS), response=STORY_A),
    "pairwise": surrounding_record(task=TASK, requirements=list(REQUIREMENTS), response_a=STORY_A, response_b=STORY_B),
    "pairwise_evidence": surrounding_record(task=TASK, requirements=list(REQUIREMENTS), response_a=STORY_A,
                                            response_b=STORY_B),
}


def test_shipped_rubrics_are_versioned_and_hashed_from_file_bytes():
    assert set(SHIPPED) <= set(available_rubrics())
    assert sorted(entry.name for entry in RUBRICS.entries() if not entry.plugin) == SHIPPED  # plugins add their own
    for name in SHIPPED:
        path = rubric_path(name)
        data = yaml.safe_load(path.read_bytes())
        rubric = load_rubric(name)
        assert data["version"] == rubric.version
        assert rubric.name == name
        assert rubric_hash(name) == hashlib.sha256(path.read_bytes()).hexdigest()[:16] == rubric.hash


def test_infilling_rubric_has_the_five_dimensions():
    rubric = load_rubric("infilling_narrative")
    assert rubric.keys == ("fluency", "faithfulness", "coherence", "consistency", "informativeness")
    assert rubric.scale == (1, 2, 3, 4, 5)
    quality = load_rubric("creative_quality")
    assert quality.keys == ("craft", "structure_coherence", "originality", "genre_effectiveness", "characterization")
    assert [d.key for d in quality.dimensions if d.nullable] == ["characterization"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_rubric_renders_with_all_slots_filled_and_no_leakage(name):
    rubric = load_rubric(name)
    messages = render_item(rubric, RECORDS[name])
    assert [m.role for m in messages] == ["system", "user"]
    prompt = "\n".join(m.content for m in messages)
    assert not slots(prompt), "a {{slot}} was left in the prompt"
    assert "{{" not in prompt
    for leaked in FORBIDDEN:
        assert leaked not in prompt, f"{leaked!r} reached the judge prompt"
    # What the judge must see does reach it.
    for field in rubric.inputs:
        value = RECORDS[name][field]
        if isinstance(value, str):
            assert value in prompt
    if "requirements" in rubric.inputs:
        for requirement in REQUIREMENTS:
            assert f"[{requirement.constraint_id}] {requirement.requirement}" in prompt


def test_prompts_come_from_the_rubrics_inputs_only():
    """Whatever else a record holds, each rubric's prompt is the same as from its declared inputs alone."""
    for name in SHIPPED:
        rubric = load_rubric(name)
        inputs = {key: value for key, value in RECORDS[name].items() if key in rubric.inputs}
        assert render_item(rubric, surrounding_record(**inputs)) == render_item(rubric, inputs)


def test_missing_field_raises_instead_of_leaving_a_slot():
    rubric = load_rubric("infilling_narrative")
    with pytest.raises(RubricError, match="candidate"):
        render_item(rubric, {"problem": PROBLEM})
    with pytest.raises(UnfilledSlotError, match="candidate"):
        fill("Passage: {{problem}} Fill: {{candidate}}", {"problem": "x"})


def test_braces_inside_texts_are_not_taken_for_slots():
    story = "He wrote {{candidate}} on the wall and {{ left }}."
    messages = render_item(load_rubric("creative_quality"), {"task": TASK, "requirements": REQUIREMENTS, "response": story})
    assert story in messages[1].content


def test_plain_string_requirements_get_numbered_ids():
    checklist = load_rubric("creative_checklist")
    messages = render_item(checklist, {"task": TASK, "requirements": ["First person.", "Ends at night."], "response": STORY_A})
    assert "[r1] First person." in messages[1].content
    assert "[r2] Ends at night." in messages[1].content
    with pytest.raises(RubricError, match="unique"):
        render_item(checklist, {"task": TASK, "response": STORY_A, "requirements": [
            {"constraint_id": "a", "requirement": "x"}, {"constraint_id": "a", "requirement": "y"}]})


def test_answer_schemas():
    infilling = answer_schema(load_rubric("infilling_narrative"))
    assert infilling["required"] == ["fluency", "faithfulness", "coherence", "consistency", "informativeness"]
    assert infilling["properties"]["fluency"]["enum"] == [1, 2, 3, 4, 5]
    assert infilling["additionalProperties"] is False
    quality = answer_schema(load_rubric("creative_quality"))
    assert quality["properties"]["characterization"]["anyOf"] == [
        {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        {"type": "null"},
    ]
    assert quality["properties"]["craft"] == {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    checklist = answer_schema(load_rubric("creative_checklist"), ["c1", "c2", "c3"])
    assert checklist["required"] == ["c1", "c2", "c3"]
    assert checklist["properties"]["c2"] == {"$ref": "#/$defs/item"}
    assert checklist["$defs"]["item"]["properties"]["score"]["enum"] == [0, 0.5, 1]
    assert checklist["$defs"]["item"]["required"] == ["score", "reason"]
    with pytest.raises(RubricError):
        answer_schema(load_rubric("creative_checklist"))
    pairwise = answer_schema(load_rubric("pairwise"))
    assert pairwise["properties"]["creative_quality"]["enum"] == [
        "A_clearly_better",
        "A_slightly_better",
        "tie",
        "B_slightly_better",
        "B_clearly_better",
    ]


def test_evidence_first_schema_puts_the_evidence_before_the_verdicts():
    rubric = load_rubric("pairwise_evidence")
    assert rubric.kind == "pairwise" and rubric.evidence_first and rubric.per_requirement
    assert rubric.keys == ("constraint_following", "creative_quality")
    with pytest.raises(RubricError, match="requirement ids"):
        answer_schema(rubric)
    schema = answer_schema(rubric, ["c1", "c2"])
    # Key order is the order a grammar-constrained judge writes in: statuses, facets, then the verdicts.
    assert list(schema["properties"]) == ["requirements_a", "requirements_b", "facets", "constraint_following",
                                          "creative_quality"]
    assert schema["required"] == list(schema["properties"])
    for side in ("requirements_a", "requirements_b"):
        assert schema["properties"][side]["required"] == ["c1", "c2"]
        assert schema["properties"][side]["properties"]["c2"] == {"$ref": "#/$defs/status"}
    assert schema["$defs"]["status"]["properties"]["status"]["enum"] == ["satisfied", "partial", "missing"]
    assert schema["$defs"]["status"]["required"] == ["status", "quote"]
    pattern = re.compile(schema["$defs"]["status"]["properties"]["quote"]["pattern"])
    assert pattern.match("I climbed the stairs") and pattern.match("") and pattern.match("x" * 100)
    assert not pattern.match("x" * 101) and not pattern.match('he said "no"') and not pattern.match("line\nbreak")
    facets = schema["properties"]["facets"]
    assert facets["required"] == ["craft", "structure_coherence", "originality", "genre_effectiveness",
                                  "characterization"]
    assert facets["properties"]["craft"]["enum"] == ["A", "B", "tie"]
    assert schema["properties"]["creative_quality"]["enum"][0] == "A_clearly_better"


def test_evidence_fields_are_checked_when_a_rubric_loads(tmp_path):
    text = rubric_path("pairwise_evidence").read_text()
    half = tmp_path / "half.yaml"
    half.write_text(text.replace("facet_labels: [A, B, tie]\n", ""))
    with pytest.raises(RubricError, match="needs facet_labels as well"):
        load_rubric(half)
    stray = tmp_path / "stray.yaml"
    stray.write_text(text.replace("quoted_statuses: [satisfied, partial]", "quoted_statuses: [satisfied, vague]"))
    with pytest.raises(RubricError, match="vague"):
        load_rubric(stray)
    scores = tmp_path / "scores.yaml"
    scores.write_text(rubric_path("creative_quality").read_text() + "statuses: [ok]\n")
    with pytest.raises(RubricError, match="belong to a pairwise rubric"):
        load_rubric(scores)


def test_a_rubric_file_given_by_path_is_loaded_and_checked(tmp_path):
    good = tmp_path / "terse.yaml"
    good.write_text(
        "name: terse\nversion: 3\nkind: scores\ninputs: [problem, candidate]\n"
        "dimensions: [{key: fluency}]\nscale: [1, 2, 3]\n"
        "system: Rate fluency 1-3.\nuser: '{{problem}} / {{candidate}}'\n"
    )
    rubric = load_rubric(good)
    assert rubric.version == 3 and rubric.keys == ("fluency",)
    assert render_item(rubric, {"problem": "P ______", "candidate": "C"})[1].content == "P ______ / C"
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("{{candidate}}", "{{model}}"))
    with pytest.raises(RubricError, match="differ from declared inputs"):
        load_rubric(bad)


def test_a_rubric_with_inputs_of_its_own_renders_from_them_alone(tmp_path):
    own = tmp_path / "next_line.yaml"
    own.write_text(
        "name: next_line\nversion: 1\nkind: scores\ninputs: [opening, candidate]\n"
        "dimensions: [{key: fluency}]\nscale: [1, 2, 3]\n"
        "system: Rate fluency 1-3.\nuser: 'Opening: {{opening}} / Next: {{candidate}}'\n"
    )
    record = {"opening": "It rained.", "candidate": "The river rose.", "model": "smollm2", "condition": "sharded"}
    messages = render_item(load_rubric(own), record)
    assert [m.content for m in messages] == ["Rate fluency 1-3.", "Opening: It rained. / Next: The river rose."]
    with pytest.raises(RubricError, match="opening"):
        render_item(load_rubric(own), {"candidate": "The river rose."})
