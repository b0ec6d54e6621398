"""A multi-turn study's traces come from the library (multi_turn.multi_turn_records), built from what its cell logged:
one per conversation with a span per turn, each judge's verdicts as assessments (per requirement for a checklist),
and the reason in place of the scores where a judge gave no valid verdict or the reply was not scored."""

from __future__ import annotations

from types import SimpleNamespace

from narrative_eval.judges import rubric_hash
from narrative_eval.multi_turn import NO_VALID_JUDGMENT
from narrative_eval.records import CellSpec, JudgeResult, JudgeSpec, ModelSpec
from narrative_eval.studies.incremental.study import IncrementalDeliveryStudy

MODEL = ModelSpec(id="smollm2", weights="embedded:smollm2-135m-instruct")
QUALITY = {"craft": 4.0, "structure_coherence": 3.0, "originality": 2.0, "genre_effectiveness": 5.0,
           "characterization": None}


def verdicts(checklist_ok: bool) -> dict:
    items = [{"constraint_id": "c1", "score": 1.0, "reason": "x"}, {"constraint_id": "c2", "score": 0.5, "reason": "y"}]
    checklist = JudgeResult(judge_id="j", rubric="creative_checklist", rubric_hash=rubric_hash("creative_checklist"),
                            ok=checklist_ok, scores={"adherence": 0.75} if checklist_ok else {},
                            details={"items": items} if checklist_ok else {})
    quality = JudgeResult(judge_id="j", rubric="creative_quality", rubric_hash=rubric_hash("creative_quality"), ok=True,
                          scores=QUALITY)
    return {"checklist": checklist.model_dump(mode="json"), "quality": quality.model_dump(mode="json")}


def test_each_conversation_is_a_trace_with_its_verdicts_as_assessments():
    cell = CellSpec(study="incremental-delivery", sweep="s", model=MODEL, prompt_setting="default",
                    condition="sharded", judges=(JudgeSpec(id="j", model=MODEL),), data_path="tasks.json",
                    data_sha256="-")
    stories = ("mystery_001", "mystery_002", "mystery_003")  # judged validly; its checklist failed; not scored
    rows = [{"story_id": story, "genre": "mystery", "condition": "sharded", "seed": 0, "attempt": 0, "turn": turn,
             "final": turn == 1 and story != stories[2], "user": f"u{turn}", "reply": f"r{turn}",
             "prompt_tokens": 10, "completion_tokens": 5, "finish_reason": "stop", "truncated": story == stories[2]}
            for story in stories for turn in (0, 1)]
    judgments = [{"story_id": story, "seed": 0, "judge": "j", **verdicts(ok)}
                 for story, ok in zip(stories, (True, False), strict=False)]
    result = SimpleNamespace(tables={"conversations.json": rows}, artifacts={"judgments.json": judgments})
    records = IncrementalDeliveryStudy().cell_records(cell, result)
    assert [t.key for t in records.traces] == [f"{story}/seed0" for story in stories]
    judged, failed, unscored = ({a.name: a for a in trace.assessments} for trace in records.traces)
    assert {name: a.value for name, a in judged.items()} == {
        "j/checklist/c1": 1.0, "j/checklist/c2": 0.5, "j/adherence": 0.75, "j/craft": 4, "j/structure_coherence": 3,
        "j/originality": 2, "j/genre_effectiveness": 5, "j/characterization": None}
    assert judged["j/adherence"].kind == "code" and judged["j/checklist/c1"].source_id == "j (smollm2)"
    assert judged["j/characterization"].error == "not scored" and isinstance(judged["j/craft"].value, int)
    for trace in (failed, unscored):  # the quality rubric's dimensions, each with the reason
        assert set(trace) == {f"j/{name}" for name in QUALITY}
        assert {(a.value, a.error) for a in trace.values()} == {(None, NO_VALID_JUDGMENT)}
    first = records.traces[0]
    assert [turn.user for turn in first.turns] == ["u0", "u1"] and first.rows == (0, 1)
    assert first.attributes["genre"] == "mystery" and first.attributes["turns"] == 2
    assert records.dataset.to_dict("records") == [{"story_id": story, "genre": "mystery"} for story in stories]
