"""The openai and anthropic SDK paths against a local server speaking their wire formats.

The server answers with real SmolLM2 generations; faults (429 with Retry-After, 500,
spend limit) are scripted, and a wrong key gets the real 401 treatment.
"""

from __future__ import annotations

import json

import pytest

from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.records import GenerationParams, Message, ModelSpec

pytest.importorskip("openai")
pytest.importorskip("anthropic")

KEY = "test-key-123"
FAST_RETRY = {"retry_base_delay": 0.05, "retry_max_delay": 0.2}


@pytest.fixture
def server(api_server):
    api_server.reset()
    yield api_server
    api_server.reset()


def openai_backend(server, monkeypatch, key=KEY, **options):
    from narrative_eval.backends.openai_backend import OpenAIBackend

    monkeypatch.setenv("OPENAI_API_KEY", key)
    return OpenAIBackend(ModelSpec(id="gpt", backend="openai", weights="gpt-test", options={"base_url": server.openai_base_url, **FAST_RETRY, **options}))


def anthropic_backend(server, monkeypatch, key=KEY, **options):
    from narrative_eval.backends.anthropic_backend import AnthropicBackend

    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    return AnthropicBackend(ModelSpec(id="claude", backend="anthropic", weights="claude-test", options={"base_url": server.anthropic_base_url, **FAST_RETRY, **options}))


# --------------------------------------------------------------------------- openai


def test_openai_batch_sends_what_we_asked(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch, max_concurrency=2)
    replies = backend.generate(conversations, GenerationParams(temperature=0.5, top_p=0.9, max_new_tokens=20, seed=5, stop=("\n\n",)))
    assert all(r.ok and r.text for r in replies)
    assert all(r.prompt_tokens > 0 and 0 < r.completion_tokens <= 20 for r in replies)
    received = server.requests()
    assert len(received) == len(conversations)
    body = received[0].body
    assert body["model"] == "gpt-test" and body["seed"] == 5 and body["max_completion_tokens"] == 20
    assert body["stop"] == ["\n\n"] and body["top_p"] == 0.9
    assert received[0].headers["authorization"] == f"Bearer {KEY}"
    sent = sorted(json.dumps(r.body["messages"]) for r in received)
    expected = sorted(json.dumps([m.model_dump() for m in c]) for c in conversations)
    assert sent == expected
    backend.close()


def test_openai_json_schema_is_strict_structured_output(server, monkeypatch, judge_schema):
    backend = openai_backend(server, monkeypatch)
    conversation = [Message(role="user", content="Rate 'The cat sat.' from 1 to 5 with a reason.")]
    reply = backend.generate([conversation], GenerationParams(temperature=0.0, max_new_tokens=80, json_schema=judge_schema))[0]
    verdict = json.loads(reply.text)
    assert set(verdict) == {"score", "reason"}
    response_format = server.requests()[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True and response_format["json_schema"]["schema"] == judge_schema


def test_openai_429_retry_after_is_honoured(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch)
    server.fail_next(429, retry_after="1")
    reply = backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0]
    assert reply.ok and reply.text
    first, second = server.requests()
    assert first.status == 429 and second.status == 200
    # Our own backoff with these options waits at most 0.2 s; only Retry-After explains 1 s.
    assert second.arrived - first.arrived >= 1.0


def test_openai_401_is_not_retried(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch, key="wrong-key")
    reply = backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0]
    assert not reply.ok and reply.finish_reason == "error" and "authentication" in reply.error
    assert len(server.requests()) == 1
    assert "wrong-key" not in reply.error
    # Every later request fails at once without being sent.
    later = backend.generate(conversations, GenerationParams(max_new_tokens=8))
    assert all(not r.ok for r in later) and len(server.requests()) == 1


def test_openai_spend_limit_is_not_retried(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch)
    server.fail_next(429, code="insufficient_quota")
    reply = backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0]
    assert reply.error and reply.error.startswith("spend limit")
    assert len(server.requests()) == 1


def test_openai_server_errors_retried_then_given_up(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch, max_attempts=3)
    server.fail_next(500, count=2)
    assert backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0].ok
    assert [r.status for r in server.requests()] == [500, 500, 200]

    server.reset()
    server.fail_next(500, count=3)
    failed = backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0]
    assert failed.finish_reason == "error" and "3 attempt" in failed.error
    assert len(server.requests()) == 3


def test_failures_are_not_cached_and_rerun_sends_only_them(server, monkeypatch, conversations, tmp_path):
    backend = openai_backend(server, monkeypatch, max_attempts=1, max_concurrency=1)
    cache = RequestCache(tmp_path / "requests.sqlite")
    server.fail_next(500)
    first = CachedBackend(backend, cache).generate(conversations, GenerationParams(max_new_tokens=8, seed=3))
    assert sum(not r.ok for r in first) == 1
    rerun = CachedBackend(backend, cache)
    second = rerun.generate(conversations, GenerationParams(max_new_tokens=8, seed=3))
    assert all(r.ok for r in second) and rerun.generated == 1


def test_a_chunk_reaches_the_cache_reply_by_reply(server, monkeypatch, conversations, tmp_path):
    """Each reply is stored as it arrives, so a sweep killed mid-chunk loses only the requests in flight."""
    writes: list[tuple[int, int]] = []  # (replies stored by the write, requests the server had received)

    class WatchedCache(RequestCache):
        def put_many(self, items):
            writes.append((len(items), len(server.requests())))
            super().put_many(items)

    chunk = [c for c in conversations for _ in range(2)]
    for concurrency in (1, 3):
        writes.clear()
        backend = openai_backend(server, monkeypatch, max_concurrency=concurrency)
        params = [GenerationParams(max_new_tokens=8, seed=100 * concurrency + i) for i in range(len(chunk))]
        replies = CachedBackend(backend, WatchedCache(tmp_path / f"requests-{concurrency}.sqlite")).generate(chunk, params)
        backend.close()
        assert all(r.ok for r in replies) and [n for n, _ in writes] == [1] * len(chunk)
        if concurrency == 1:  # one request in flight: each reply is stored before the next request is sent
            assert [sent for _, sent in writes] == list(range(1, len(chunk) + 1))
        server.reset()


def test_api_key_stays_out_of_identity_and_cache_key(server, monkeypatch, conversations):
    one = openai_backend(server, monkeypatch, key="secret-one")
    two = openai_backend(server, monkeypatch, key="secret-two")
    params = GenerationParams(seed=1)
    assert "secret" not in one.identity()
    assert request_key(one, conversations[0], params) == request_key(two, conversations[0], params)


def test_openai_stream(server, monkeypatch, conversations):
    backend = openai_backend(server, monkeypatch)
    pieces = list(backend.stream(conversations[0], GenerationParams(temperature=0.0, max_new_tokens=20)))
    assert len(pieces) > 1 and "".join(pieces).strip()


# --------------------------------------------------------------------------- anthropic


def test_anthropic_system_and_batch(server, monkeypatch, conversations):
    backend = anthropic_backend(server, monkeypatch)
    replies = backend.generate(conversations, GenerationParams(temperature=0.5, max_new_tokens=20, stop=("###",)))
    assert all(r.ok and r.text for r in replies)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in replies)
    by_first_user = {r.body["messages"][0]["content"]: r for r in server.requests()}
    request = by_first_user[conversations[0][1].content]
    assert request.body["system"] == conversations[0][0].content
    assert all(m["role"] != "system" for m in request.body["messages"])
    assert request.body["stop_sequences"] == ["###"] and "top_p" not in request.body
    assert KEY in (request.headers.get("x-api-key"), request.headers.get("authorization", "").removeprefix("Bearer "))


def test_anthropic_json_schema_as_forced_tool(server, monkeypatch, judge_schema):
    backend = anthropic_backend(server, monkeypatch)
    conversation = [Message(role="user", content="Rate 'The cat sat.' from 1 to 5 with a reason.")]
    reply = backend.generate([conversation], GenerationParams(temperature=0.0, max_new_tokens=80, json_schema=judge_schema))[0]
    verdict = json.loads(reply.text)
    assert isinstance(verdict["score"], int) and isinstance(verdict["reason"], str)
    body = server.requests()[0].body
    assert body["tools"][0]["input_schema"] == judge_schema
    assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}


def test_anthropic_429_retry_after_then_success(server, monkeypatch, conversations):
    backend = anthropic_backend(server, monkeypatch)
    server.fail_next(429, retry_after="1")
    assert backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0].ok
    first, second = server.requests()
    assert (first.status, second.status) == (429, 200) and second.arrived - first.arrived >= 1.0


def test_anthropic_401_is_not_retried(server, monkeypatch, conversations):
    backend = anthropic_backend(server, monkeypatch, key="wrong-key")
    reply = backend.generate(conversations[:1], GenerationParams(max_new_tokens=8))[0]
    assert reply.finish_reason == "error" and "authentication" in reply.error
    assert len(server.requests()) == 1


def test_anthropic_stream(server, monkeypatch, conversations):
    backend = anthropic_backend(server, monkeypatch)
    pieces = list(backend.stream(conversations[1], GenerationParams(temperature=0.0, max_new_tokens=20)))
    assert len(pieces) > 1 and "".join(pieces).strip()
