"""Reply validation, retries and recorded failures.

What is under test here is what happens to a reply's text — parsing, validation, retry,
failure records — so a scripted backend that hands out queued reply texts stands in for the
engine. Real inference is exercised in test_llama_judge.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from narrative_eval.backends import Backend, CachedBackend, RequestCache
from narrative_eval.judges import (
    JudgeReplyError,
    failure_rate,
    is_high_quality,
    judge_many,
    judge_pairwise,
    judge_pairwise_orders,
    load_rubric,
    pairwise_consistency,
    parse_reply,
    qavg,
    summarize,
)
from narrative_eval.records import GenerationParams, JudgeSpec, ModelSpec, Reply
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, QUALITY_RUBRIC

from .conftest import CANDIDATE, PROBLEM, REQUIREMENTS, STORY_A, STORY_B, TASK, judge_infills

SCRIPTED_MODEL = ModelSpec(id="scripted-judge", backend="scripted", weights="scripted-replies")


class ScriptedBackend(Backend):
    """Hands out queued reply texts in order and records the requests it was sent."""

    name = "scripted"

    def __init__(self, texts: Sequence[str]):
        super().__init__(SCRIPTED_MODEL)
        self.queue = list(texts)
        self.requests: list[tuple[list, GenerationParams]] = []

    def generate(self, conversations, params):
        replies = []
        for conversation in conversations:
            self.requests.append((list(conversation), params))
            replies.append(Reply(text=self.queue.pop(0)))
        return replies


def judge(max_retries: int = 2, seed: int = 7) -> JudgeSpec:
    return JudgeSpec(id="scripted", model=SCRIPTED_MODEL, temperature=0.0, seed=seed, max_retries=max_retries)


def infill_json(**overrides) -> str:
    scores = {"fluency": 3, "faithfulness": 2, "coherence": 4, "consistency": 3, "informativeness": 2, **overrides}
    return json.dumps(scores)


INFILL_ITEM = {"problem": PROBLEM, "candidate": CANDIDATE}


# --------------------------------------------------------------------------- parsing


def test_prose_and_fence_wrapped_json_is_accepted():
    rubric = load_rubric("infilling_narrative")
    bare = parse_reply(rubric, infill_json())[0]
    assert bare == {"fluency": 3.0, "faithfulness": 2.0, "coherence": 4.0, "consistency": 3.0, "informativeness": 2.0}
    assert parse_reply(rubric, f"Here is my rating:\n{infill_json()}\nHope this helps.")[0] == bare
    assert parse_reply(rubric, f"```json\n{infill_json()}\n```")[0] == bare
    # A stray object before the answer does not hide it.
    assert parse_reply(rubric, '{"note": "thinking"} then ' + infill_json())[0] == bare


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I think it is quite good, maybe a four.", "no JSON"),
        ('{"fluency": 3, "faithfulness": 2', "no JSON"),
        (infill_json(fluency=6), "less than or equal to 5"),
        (infill_json(coherence=0), "greater than or equal to 1"),
        (infill_json(fluency="4"), "valid integer"),
        (infill_json(fluency=True), "valid integer"),
        (json.dumps({"fluency": 3, "faithfulness": 2, "coherence": 4, "consistency": 3}), "informativeness"),
        ("[3, 2, 4, 3, 2]", "JSON object"),
    ],
)
def test_invalid_infilling_replies_are_rejected(text, message):
    with pytest.raises(JudgeReplyError, match=message):
        parse_reply(load_rubric("infilling_narrative"), text)


def test_checklist_must_answer_exactly_the_requirement_ids():
    rubric = load_rubric("creative_checklist")
    ids = ["c1", "c2", "c3"]
    good = {rid: {"score": s, "reason": "because"} for rid, s in zip(ids, (1, 0.5, 0))}
    scores, details = parse_reply(rubric, json.dumps(good), ids)
    assert scores == {"adherence": pytest.approx(0.5)}
    assert [item["constraint_id"] for item in details["items"]] == ids
    # The list form hosted judges sometimes use is equivalent.
    listed = {"items": [{"id": rid, **good[rid]} for rid in ids]}
    assert parse_reply(rubric, json.dumps(listed), ids) == (scores, details)
    with pytest.raises(JudgeReplyError, match="missing ids"):
        parse_reply(rubric, json.dumps({k: good[k] for k in ("c1", "c2")}), ids)
    with pytest.raises(JudgeReplyError, match="unknown ids"):
        parse_reply(rubric, json.dumps({**good, "c4": good["c1"]}), ids)
    with pytest.raises(JudgeReplyError, match="answered twice"):
        parse_reply(rubric, json.dumps({"items": [{"id": "c1", **good["c1"]}] * 3}), ids)
    with pytest.raises(JudgeReplyError, match="one of"):
        parse_reply(rubric, json.dumps({**good, "c2": {"score": 0.7, "reason": "x"}}), ids)
    with pytest.raises(JudgeReplyError, match="reason"):
        parse_reply(rubric, json.dumps({**good, "c3": {"score": 1}}), ids)


def test_quality_characterization_may_be_null_but_not_missing():
    rubric = load_rubric("creative_quality")
    answer = {"craft": 3, "structure_coherence": 2, "originality": 2, "genre_effectiveness": 3, "characterization": None}
    assert parse_reply(rubric, json.dumps(answer))[0]["characterization"] is None
    with pytest.raises(JudgeReplyError, match="craft"):
        parse_reply(rubric, json.dumps({**answer, "craft": None}))
    without = {k: v for k, v in answer.items() if k != "characterization"}
    with pytest.raises(JudgeReplyError, match="characterization"):
        parse_reply(rubric, json.dumps(without))


def test_pairwise_verdict_labels():
    rubric = load_rubric("pairwise")
    scores, details = parse_reply(rubric, '{"constraint_following": "A clearly better", "creative_quality": "b_slightly_better"}')
    assert scores == {"constraint_following": 2.0, "creative_quality": -1.0}
    assert details["verdicts"] == {"constraint_following": "A_clearly_better", "creative_quality": "B_slightly_better"}
    with pytest.raises(JudgeReplyError, match="verdict"):
        parse_reply(rubric, '{"constraint_following": "A", "creative_quality": "tie"}')


# --------------------------------------------------------------------------- retry and failure records


def test_invalid_then_valid_reply_is_retried_with_a_new_seed():
    backend = ScriptedBackend(["not json at all", infill_json()])
    [result] = judge_infills(backend, judge(seed=7), [INFILL_ITEM])
    assert result.ok and result.attempts == 2
    assert result.scores["coherence"] == 4.0
    assert result.raw_replies == ["not json at all", infill_json()]
    seeds = [params.seed for _, params in backend.requests]
    assert seeds == [7, 8]
    assert all(params.temperature == 0.0 and params.json_schema is not None for _, params in backend.requests)


def test_exhausted_retries_record_a_failure_with_every_raw_reply():
    texts = [infill_json(fluency=9), "Sure! The fill is fine.", infill_json(informativeness=None)]
    backend = ScriptedBackend(texts)
    [result] = judge_infills(backend, judge(max_retries=2), [INFILL_ITEM])
    assert not result.ok
    assert result.scores == {}
    assert result.attempts == 3
    assert result.raw_replies == texts
    assert "attempt 3" in result.error and "informativeness" in result.error
    assert result.rubric == "infilling_narrative" and result.rubric_hash == load_rubric("infilling_narrative").hash
    assert failure_rate([result]) == 1.0


def test_batch_retries_only_the_failures():
    backend = ScriptedBackend([infill_json(), "oops", infill_json(fluency=1), infill_json(fluency=5)])
    items = [INFILL_ITEM, INFILL_ITEM, {"problem": PROBLEM, "candidate": "Something else."}]
    results = judge_infills(backend, judge(max_retries=1), items)
    assert [r.ok for r in results] == [True, True, True]
    assert [r.attempts for r in results] == [1, 2, 1]
    assert results[1].scores["fluency"] == 5.0
    assert failure_rate(results) == 0.0


def test_retries_are_new_requests_to_the_cache_and_reruns_are_deterministic(tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    first = CachedBackend(ScriptedBackend(["{broken", infill_json()]), cache)
    [result] = judge_infills(first, judge(), [INFILL_ITEM])
    assert result.ok and result.attempts == 2 and first.generated == 2
    # A rerun is answered wholly from the cache, reproducing the same attempts.
    second = CachedBackend(ScriptedBackend([]), cache)
    [again] = judge_infills(second, judge(), [INFILL_ITEM])
    assert second.hits == 2 and second.generated == 0
    assert again.raw_replies == result.raw_replies and again.scores == result.scores
    cache.close()


def test_request_errors_are_retried_and_recorded():
    class FailingBackend(ScriptedBackend):
        def generate(self, conversations, params):
            return [Reply(text="", finish_reason="error", error="connection refused") for _ in conversations]

    [result] = judge_infills(FailingBackend([]), judge(max_retries=1), [INFILL_ITEM])
    assert not result.ok and result.attempts == 2 and "connection refused" in result.error


def test_judge_model_must_match_the_backend():
    other = JudgeSpec(id="x", model=ModelSpec(id="other", weights="other"))
    with pytest.raises(ValueError, match="backend runs"):
        judge_infills(ScriptedBackend([infill_json()]), other, [INFILL_ITEM])


def test_checklist_wrapper_sends_a_per_task_schema_and_reports_adherence():
    answer = {"c1": {"score": 1, "reason": "bottle found"}, "c2": {"score": 1, "reason": "uses I"}, "c3": {"score": 0.5, "reason": "lamp lit, not last"}}
    backend = ScriptedBackend([json.dumps(answer)])
    [result] = judge_many(backend, judge(), CHECKLIST_RUBRIC, [{"task": TASK, "requirements": list(REQUIREMENTS), "response": STORY_A}])
    assert result.ok and result.scores["adherence"] == pytest.approx(2.5 / 3)
    assert result.details["items"][2] == {"constraint_id": "c3", "score": 0.5, "reason": "lamp lit, not last"}
    schema = backend.requests[0][1].json_schema
    assert schema["required"] == ["c1", "c2", "c3"]


def test_quality_wrapper():
    answer = {"craft": 2, "structure_coherence": 3, "originality": 2, "genre_effectiveness": 2, "characterization": None}
    [result] = judge_many(ScriptedBackend([json.dumps(answer)]), judge(), QUALITY_RUBRIC, [{"task": TASK, "requirements": list(REQUIREMENTS), "response": STORY_A}])
    assert result.ok and result.scores["characterization"] is None
    assert result.mean() == pytest.approx(9 / 4)


IDS = ["c1", "c2", "c3"]


def evidence_answer(**overrides) -> dict:
    """A valid evidence-first reply for REQUIREMENTS: statuses with quotes for A and B, facets, then verdicts."""
    answer = {
        "requirements_a": {
            "c1": {"status": "satisfied", "quote": "I found the bottle at dawn"},
            "c2": {"status": "satisfied", "quote": "I climbed the stairs"},
            "c3": {"status": "partial", "quote": "lit the lamp"},
        },
        "requirements_b": {
            "c1": {"status": "missing", "quote": ""},
            "c2": {"status": "missing", "quote": ""},
            "c3": {"status": "missing", "quote": ""},
        },
        "facets": {"craft": "A", "structure_coherence": "A", "originality": "tie", "genre_effectiveness": "A",
                   "characterization": "B"},
        "constraint_following": "A_clearly_better",
        "creative_quality": "A_slightly_better",
    }
    return {**answer, **overrides}


def test_evidence_first_reply_is_validated_whole():
    rubric = load_rubric("pairwise_evidence")
    scores, details = parse_reply(rubric, "My comparison:\n" + json.dumps(evidence_answer()), IDS)
    assert scores == {"constraint_following": 2.0, "creative_quality": 1.0}
    assert details["verdicts"] == {"constraint_following": "A_clearly_better", "creative_quality": "A_slightly_better"}
    assert [(e["constraint_id"], e["status"], e["quote"]) for e in details["evidence"]["A"]] == [
        ("c1", "satisfied", "I found the bottle at dawn"), ("c2", "satisfied", "I climbed the stairs"),
        ("c3", "partial", "lit the lamp")]
    assert [e["status"] for e in details["evidence"]["B"]] == ["missing"] * 3
    assert details["facets"]["characterization"] == "B" and details["facets"]["originality"] == "tie"
    # Case and spacing of labels are forgiven; a list of {id, ...} is the same as a mapping.
    loose = evidence_answer(facets={"craft": "a", "structure_coherence": "A", "originality": "Tie",
                                    "genre_effectiveness": "A", "characterization": "b"},
                            requirements_b=[{"id": rid, "status": "Missing", "quote": ""} for rid in IDS],
                            constraint_following="A clearly better", creative_quality="a-slightly-better")
    assert parse_reply(rubric, json.dumps(loose), IDS) == (scores, details)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"requirements_b": None}, "requirements_b: missing"),
        ({"requirements_b": "all missing"}, "requirements_b: expected one entry per requirement id"),
        ({"requirements_a": {"c1": {"status": "satisfied", "quote": "x"}}}, "requirements_a answers 1 items for 3"),
        ({"requirements_a": {**evidence_answer()["requirements_a"], "c9": {"status": "missing", "quote": ""}}},
         "unknown ids"),
        ({"requirements_a": {**evidence_answer()["requirements_a"], "c2": {"status": "done", "quote": "x"}}},
         r"requirements_a\.c2: status: .*status must be one of"),
        ({"requirements_a": {**evidence_answer()["requirements_a"], "c1": {"status": "satisfied", "quote": "  "}}},
         "'satisfied' status needs a quote"),
        ({"requirements_a": {**evidence_answer()["requirements_a"], "c1": {"status": "satisfied", "quote": "x" * 101}}},
         "quote of 101 characters, over the 100 allowed"),
        ({"requirements_b": {**evidence_answer()["requirements_b"], "c3": {"status": "missing"}}},
         r"requirements_b\.c3: quote"),
        ({"requirements_b": {**evidence_answer()["requirements_b"], "c3": {"status": "missing", "quote": 7}}},
         r"requirements_b\.c3: quote"),
        ({"facets": {"craft": "A"}}, r"facets\.structure_coherence"),
        ({"facets": {**evidence_answer()["facets"], "craft": "both"}}, "facet winner must be one of"),
        ({"facets": "A"}, "facets: expected an object"),
        ({"creative_quality": "A"}, "verdict must be one of"),
    ],
)
def test_malformed_evidence_first_replies_are_rejected(change, message):
    answer = evidence_answer(**change)
    answer = {key: value for key, value in answer.items() if value is not None}
    with pytest.raises(JudgeReplyError, match=message):
        parse_reply(load_rubric("pairwise_evidence"), json.dumps(answer), IDS)


def test_evidence_first_judge_retries_then_records_the_failure():
    item = {"task": TASK, "requirements": list(REQUIREMENTS), "response_a": STORY_A, "response_b": STORY_B}
    bad = json.dumps(evidence_answer(facets={}))
    backend = ScriptedBackend([bad, bad, bad, json.dumps(evidence_answer()), bad])
    [(forward, reversed_)] = judge_pairwise_orders(backend, judge(max_retries=1), [item], "pairwise_evidence")
    # Attempt 1 sends both orders; attempt 2 retries both with the next seed.
    assert [params.seed for _, params in backend.requests] == [7, 7, 8, 8]
    assert not forward.ok and forward.attempts == 2 and forward.raw_replies == [bad, bad]
    assert forward.error.startswith("attempt 2: facets.craft")
    assert reversed_.ok and reversed_.attempts == 2 and reversed_.scores["constraint_following"] == 2.0
    assert reversed_.rubric == "pairwise_evidence" and reversed_.details["evidence"]["B"][0]["status"] == "missing"
    schema = backend.requests[0][1].json_schema
    assert schema["properties"]["requirements_a"]["required"] == IDS
    shown = backend.requests[1][0][1].content  # the reversed order shows story B as A
    assert shown.index(STORY_B) < shown.index(STORY_A)
    assert backend.queue == [bad]


def test_pairwise_runs_both_orders_and_restores_them():
    item = {"task": TASK, "requirements": list(REQUIREMENTS), "response_a": STORY_A, "response_b": STORY_B}
    texts = [
        # forward (A = STORY_A) for both items, then reversed (A = STORY_B) for both
        '{"constraint_following": "A_clearly_better", "creative_quality": "A_slightly_better"}',
        '{"constraint_following": "tie", "creative_quality": "A_clearly_better"}',
        '{"constraint_following": "B_slightly_better", "creative_quality": "A_slightly_better"}',
        '{"constraint_following": "tie", "creative_quality": "B_clearly_better"}',
    ]
    backend = ScriptedBackend(texts)
    results = judge_pairwise(backend, judge(), [item, item], "pairwise")
    shown = [request[0][1].content for request in backend.requests]
    assert shown[0].index(STORY_A) < shown[0].index(STORY_B)
    assert shown[2].index(STORY_B) < shown[2].index(STORY_A)
    first, second = results
    assert first.ok and first.scores == {"constraint_following": 1.5, "creative_quality": 0.0}
    assert first.details["consistent"] == {"constraint_following": True, "creative_quality": False}
    assert second.details["consistent"] == {"constraint_following": True, "creative_quality": True}
    assert pairwise_consistency(results) == 0.75
    assert pairwise_consistency(results, "creative_quality") == 0.5
    assert summarize(results)["order_consistency"] == 0.75


def test_qavg_high_quality_and_summary():
    exactly_four = {"fluency": 4, "faithfulness": 4, "coherence": 4, "consistency": 4, "informativeness": 4}
    assert qavg(exactly_four) == 4.0 and not is_high_quality(exactly_four)
    assert is_high_quality({**exactly_four, "fluency": 5})
    dimensions = load_rubric("infilling_narrative").keys
    with pytest.raises(KeyError, match="faithfulness"):
        qavg({"fluency": 5}, dimensions)
    # QAvg follows the rubric's own dimension list, whatever its length.
    assert qavg({"fluency": 5, "coherence": 2, "relevance": 2}, ("fluency", "coherence", "relevance")) == 3.0
    backend = ScriptedBackend([infill_json(), infill_json(fluency=5, faithfulness=5, coherence=5, consistency=5, informativeness=4), "x", "y"])
    results = judge_many(backend, judge(max_retries=1), "infilling_narrative", [INFILL_ITEM] * 3)
    assert [r.ok for r in results] == [True, True, False]
    metrics = summarize(results)
    assert metrics["failure_rate"] == pytest.approx(1 / 3)
    assert metrics["fluency"] == 4.0
    assert metrics["qavg"] == pytest.approx((2.8 + 4.8) / 2)
    assert metrics["high_pct"] == 50.0
