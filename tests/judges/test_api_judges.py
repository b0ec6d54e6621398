"""Judges behind the OpenAI (strict json_schema) and Anthropic (forced tool use) structured paths,
against the local server that speaks both wire formats with a real SmolLM2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from narrative_eval.judges import judge_many, load_rubric
from narrative_eval.records import JudgeSpec, ModelSpec
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, QUALITY_RUBRIC

from .conftest import CANDIDATE, PROBLEM, REQUIREMENTS, STORY_A, TASK, judge_infills

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("llama_cpp")

# The protocol server lives beside the backend tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

KEY = "judge-test-key"
INFILL_ITEM = {"problem": PROBLEM, "candidate": CANDIDATE}


@pytest.fixture(scope="module")
def protocol_server():
    from api_server import ApiServer

    from narrative_eval.weights import resolve_weights

    with ApiServer(resolve_weights("embedded:smollm2-135m-instruct"), api_key=KEY) as server:
        yield server


@pytest.fixture
def server(protocol_server):
    protocol_server.reset()
    return protocol_server


def hosted_judge(backend_name: str, base_url: str) -> JudgeSpec:
    model = ModelSpec(id=f"{backend_name}-judge", backend=backend_name, weights=f"{backend_name}-judge-test", options={"base_url": base_url, "retry_base_delay": 0.05})
    return JudgeSpec(id=f"{backend_name}-judge", model=model, temperature=0.0, seed=3, max_retries=1, max_new_tokens=384)


def test_openai_judge_uses_strict_json_schema(server, monkeypatch):
    from narrative_eval.backends.openai_backend import OpenAIBackend

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    judge = hosted_judge("openai", server.openai_base_url)
    backend = OpenAIBackend(judge.model)
    [result] = judge_infills(backend, judge, [INFILL_ITEM])
    assert result.ok, result.error
    assert set(result.scores) == {"fluency", "faithfulness", "coherence", "consistency", "informativeness"}
    body = server.requests()[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["schema"]["required"] == list(load_rubric("infilling_narrative").keys)
    assert body["temperature"] == 0.0 and body["seed"] == 3
    backend.close()


def test_anthropic_judge_uses_forced_tool_use(server, monkeypatch):
    from narrative_eval.backends.anthropic_backend import AnthropicBackend

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    judge = hosted_judge("anthropic", server.anthropic_base_url)
    backend = AnthropicBackend(judge.model)
    item = {"task": TASK, "requirements": list(REQUIREMENTS), "response": STORY_A}
    [quality] = judge_many(backend, judge, QUALITY_RUBRIC, [item])
    assert quality.ok, quality.error
    assert set(quality.scores) == {"craft", "structure_coherence", "originality", "genre_effectiveness", "characterization"}
    [checklist] = judge_many(backend, judge, CHECKLIST_RUBRIC, [item])
    assert checklist.ok, checklist.error
    assert [i["constraint_id"] for i in checklist.details["items"]] == ["c1", "c2", "c3"]
    bodies = [r.body for r in server.requests()]
    assert all(b["tool_choice"]["type"] == "tool" for b in bodies)
    assert bodies[-1]["tools"][0]["input_schema"]["required"] == ["c1", "c2", "c3"]
    # The rubric's system text goes to Anthropic's system field, never into a user turn.
    assert "strict judge of creative writing" in str(bodies[0]["system"])
    backend.close()
