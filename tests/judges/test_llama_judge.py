"""Real judging through llama.cpp with the embedded SmolLM2 and grammar-constrained JSON.

A 135M judge gives poor judgments; what must hold is that they are schema-valid, recorded
with the rubric hash and the judge's settings, deterministic, and blind.
"""

from __future__ import annotations

import pytest

from narrative_eval.backends import CachedBackend, RequestCache
from narrative_eval.judges import (failure_rate, judge_many, judge_pairwise, judge_pairwise_orders, load_rubric, pairwise_consistency,
                                   summarize)
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, QUALITY_RUBRIC

from .conftest import CANDIDATE, PROBLEM, REQUIREMENTS, STORY_A, STORY_B, TASK, judge_infills

GENERATION_FACTS = ["qwen2.5-7b-secret", "sharded", "L2", "98765"]


class RecordingBackend:
    """Passes requests to a real backend and keeps a copy of every prompt sent."""

    def __init__(self, backend):
        self.backend = backend
        self.spec = backend.spec
        self.prompts: list[str] = []

    def generate(self, conversations, params):
        self.prompts.extend("\n".join(m.content for m in c) for c in conversations)
        return self.backend.generate(conversations, params)


def assert_scale(result, keys, nullable=()):
    assert set(result.scores) == set(keys)
    for key in keys:
        value = result.scores[key]
        if value is None:
            assert key in nullable
        else:
            assert value in (1.0, 2.0, 3.0, 4.0, 5.0)


def test_infilling_judgment_is_schema_valid_and_blind(smollm2_backend, smollm2_judge):
    recording = RecordingBackend(smollm2_backend)
    record = {"problem": PROBLEM, "candidate": CANDIDATE, "model": "qwen2.5-7b-secret", "condition": "sharded", "level": "L2", "seed": 98765}
    [result] = judge_infills(recording, smollm2_judge, [record])
    assert result.ok, result.error
    assert result.judge_id == "smollm2-judge"
    assert result.rubric_hash == load_rubric("infilling_narrative").hash
    assert_scale(result, load_rubric("infilling_narrative").keys)
    assert recording.prompts and PROBLEM in recording.prompts[0]
    for prompt in recording.prompts:
        for fact in GENERATION_FACTS:
            assert fact not in prompt


CREATIVE_ITEM = {"task": TASK, "requirements": list(REQUIREMENTS), "response": STORY_A}


def test_checklist_judgment_is_schema_valid(smollm2_backend, smollm2_judge):
    [checklist] = judge_many(smollm2_backend, smollm2_judge, CHECKLIST_RUBRIC, [CREATIVE_ITEM])
    assert checklist.ok, checklist.error
    assert [i["constraint_id"] for i in checklist.details["items"]] == ["c1", "c2", "c3"]
    assert all(i["score"] in (0.0, 0.5, 1.0) and isinstance(i["reason"], str) for i in checklist.details["items"])
    expected = sum(i["score"] for i in checklist.details["items"]) / 3
    assert checklist.scores == {"adherence": pytest.approx(expected)}
    assert checklist.rubric_hash == load_rubric("creative_checklist").hash


def test_quality_judgment_is_schema_valid(smollm2_backend, smollm2_judge):
    [quality] = judge_many(smollm2_backend, smollm2_judge, QUALITY_RUBRIC, [CREATIVE_ITEM])
    assert quality.ok, quality.error
    quality_keys = ("craft", "structure_coherence", "originality", "genre_effectiveness", "characterization")
    assert_scale(quality, quality_keys, nullable=("characterization",))


def test_pairwise_judgment_in_both_orders_is_schema_valid(smollm2_backend, smollm2_judge):
    pair = {"task": TASK, "requirements": list(REQUIREMENTS), "response_a": STORY_A, "response_b": STORY_B}
    [preference] = judge_pairwise(smollm2_backend, smollm2_judge, [pair], "pairwise")
    assert preference.ok, preference.error
    labels = set(load_rubric("pairwise").verdicts)
    for order in ("forward", "reversed"):
        assert set(preference.details[order]) == {"constraint_following", "creative_quality"}
        assert set(preference.details[order].values()) <= labels
    assert all(-2 <= v <= 2 for v in preference.scores.values())
    assert 0.0 <= pairwise_consistency([preference]) <= 1.0
    # The verdict is the mean of the forward order and the reversed one read back in the forward order.
    assert preference.attempts == len(preference.raw_replies)
    for key, value in preference.scores.items():
        forward, restored = preference.details["forward_scores"][key], preference.details["restored_scores"][key]
        assert value == (forward + restored) / 2
        assert preference.details["consistent"][key] == ((forward > 0) - (forward < 0) == (restored > 0) - (restored < 0))


@pytest.mark.slow
def test_evidence_first_pairwise_judgment_is_schema_valid_and_blind(smollm2_backend, smollm2_judge):
    recording = RecordingBackend(smollm2_backend)
    pair = {"task": TASK, "requirements": list(REQUIREMENTS[:2]), "response_a": STORY_A, "response_b": STORY_B,
            "model": "qwen2.5-7b-secret", "condition": "sharded", "level": "L2", "seed": 98765}
    [(forward, reversed_)] = judge_pairwise_orders(recording, smollm2_judge, [pair], "pairwise_evidence")
    rubric = load_rubric("pairwise_evidence")
    for result in (forward, reversed_):
        assert result.ok, result.error
        assert result.rubric_hash == rubric.hash
        for side in ("A", "B"):
            statuses = result.details["evidence"][side]
            assert [e["constraint_id"] for e in statuses] == ["c1", "c2"]
            assert all(e["status"] in rubric.statuses and len(e["quote"]) <= 100 for e in statuses)
        assert set(result.details["facets"].values()) <= {"A", "B", "tie"}
        assert set(result.details["verdicts"]) == {"constraint_following", "creative_quality"}
    assert recording.prompts[0].index(STORY_A) < recording.prompts[0].index(STORY_B)
    assert recording.prompts[-1].index(STORY_B) < recording.prompts[-1].index(STORY_A)
    for prompt in recording.prompts:
        for fact in GENERATION_FACTS:
            assert fact not in prompt


@pytest.mark.slow
def test_judging_is_deterministic_and_cached(smollm2_backend, smollm2_judge, tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    items = [
        {"problem": PROBLEM, "candidate": CANDIDATE},
        {"problem": PROBLEM, "candidate": "Mara baked bread and went to sleep."},
    ]
    first_backend = CachedBackend(smollm2_backend, cache)
    first = judge_infills(first_backend, smollm2_judge, items)
    assert first_backend.generated >= 2
    # Uncached, greedy decoding with a fixed seed reproduces the same replies.
    direct = judge_infills(smollm2_backend, smollm2_judge, items)
    assert [r.raw_replies for r in direct] == [r.raw_replies for r in first]
    second_backend = CachedBackend(smollm2_backend, cache)
    second = judge_infills(second_backend, smollm2_judge, items)
    assert second_backend.generated == 0
    assert [r.scores for r in second] == [r.scores for r in first]
    metrics = summarize(first)
    assert metrics["failure_rate"] == failure_rate(first)
    assert set(load_rubric("infilling_narrative").keys) <= set(metrics) or metrics["failure_rate"] == 1.0
    cache.close()


def test_a_greedy_judge_on_llama_cpp_is_not_retried(smollm2_backend, smollm2_judge):
    """llama.cpp repeats a greedy reply whatever the seed, so a greedy judgment that does not validate fails after one
    attempt and says why; a sampling judge is still retried, each attempt a new request."""
    short = smollm2_judge.model_copy(update={"max_new_tokens": 4})  # too few tokens for any valid answer
    item = {"problem": PROBLEM, "candidate": CANDIDATE}
    recording = RecordingBackend(smollm2_backend)
    recording.repeats_greedy = smollm2_backend.repeats_greedy
    [greedy] = judge_infills(recording, short, [item])
    assert not greedy.ok and greedy.attempts == 1 and len(recording.prompts) == 1
    assert "not retried" in greedy.error and "token limit" in greedy.error
    # The premise, on the engine itself: the retry's seed would have brought the same reply.
    [again] = judge_infills(smollm2_backend, short.model_copy(update={"seed": short.seed + 1}), [item])
    assert again.raw_replies == greedy.raw_replies
    sampling = short.model_copy(update={"temperature": 0.8})
    [sampled] = judge_infills(smollm2_backend, sampling, [item])
    assert not sampled.ok and sampled.attempts == sampling.max_retries + 1 and "not retried" not in sampled.error
