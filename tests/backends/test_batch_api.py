"""Batch mode of the hosted backends against the local server's batch endpoints, through the real SDKs.

The server answers batch lines with the same code as synchronous requests (real SmolLM2 generations),
scripts line failures and expiry, holds batches in progress, and counts submissions.
"""

from __future__ import annotations

import json

import pytest

from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.records import GenerationParams, ModelSpec

pytest.importorskip("openai")
pytest.importorskip("anthropic")

KEY = "test-key-123"
FAST = {"retry_base_delay": 0.05, "retry_max_delay": 0.2, "batch_poll_interval": 0.05, "batch_poll_max_interval": 0.2}
PARAMS = [GenerationParams(temperature=0.0, max_new_tokens=12, seed=s) for s in (1, 2, 3)]


@pytest.fixture
def server(api_server):
    api_server.reset()
    yield api_server
    api_server.reset()


def hosted(server, monkeypatch, provider: str, key: str = KEY, **options):
    """A backend of `provider` (openai or anthropic) pointed at the local server."""
    from narrative_eval.backends.anthropic_backend import AnthropicBackend
    from narrative_eval.backends.openai_backend import OpenAIBackend

    if provider == "openai":
        monkeypatch.setenv("OPENAI_API_KEY", key)
        spec = ModelSpec(id="gpt", backend="openai", weights="gpt-test", options={"base_url": server.openai_base_url, **FAST, **options})
        return OpenAIBackend(spec)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    spec = ModelSpec(id="claude", backend="anthropic", weights="claude-test", options={"base_url": server.anthropic_base_url, **FAST, **options})
    return AnthropicBackend(spec)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_replies_equal_synchronous_ones_under_the_same_keys(server, monkeypatch, conversations, tmp_path, provider):
    sync_backend = hosted(server, monkeypatch, provider)
    sync_replies = CachedBackend(sync_backend, RequestCache(tmp_path / "sync.sqlite")).generate(conversations, PARAMS)
    assert server.batches.submissions == 0

    batch_backend = hosted(server, monkeypatch, provider, batch=True)
    batch_cache = RequestCache(tmp_path / "batch.sqlite")
    cached = CachedBackend(batch_backend, batch_cache)
    replies = cached.generate(conversations, PARAMS)
    assert server.batches.submissions == 1 and cached.batch.counts.served == len(conversations)
    assert [r.text for r in replies] == [r.text for r in sync_replies]
    assert [(r.prompt_tokens, r.completion_tokens) for r in replies] == [(r.prompt_tokens, r.completion_tokens) for r in sync_replies]
    # Cached under the synchronous key: a synchronous backend on the batch cache sends nothing.
    keys = [request_key(sync_backend, c, p) for c, p in zip(conversations, PARAMS)]
    assert set(batch_cache.get_many(keys)) == set(keys)
    before = len(server.requests())
    again = CachedBackend(sync_backend, batch_cache).generate(conversations, PARAMS)
    assert all(r.cached for r in again) and len(server.requests()) == before
    assert cached.usage.requests["batch"] == 3 and cached.usage.figures()["requests_sync"] == 0


def batch_keys_sent(server) -> list[list[str]]:
    """custom_ids of every batch the server received, in submission order."""
    return [[line["custom_id"] for line in batch.lines] for batch in server.batches.batches.values()]


def test_failed_lines_are_requeued_synchronously_and_only_they(server, monkeypatch, conversations, tmp_path):
    backend = hosted(server, monkeypatch, "openai", batch=True)
    cached = CachedBackend(backend, RequestCache(tmp_path / "requests.sqlite"))
    server.batches.line_faults = [None, "error", "expired"]
    replies = cached.generate(conversations, PARAMS)
    assert all(r.ok and r.text for r in replies)
    [submitted] = batch_keys_sent(server)
    requeued = [r for r in server.requests() if r.path.endswith("/chat/completions")]
    # Exactly the two failed lines went again, synchronously, with the bodies their batch lines carried.
    assert sorted(json.dumps(r.body, sort_keys=True) for r in requeued) == sorted(
        json.dumps(line["body"], sort_keys=True) for line in list(server.batches.batches.values())[0].lines[1:])
    assert cached.batch.counts.requeued == 2 and cached.batch.counts.served == 1 and cached.batch.counts.unanswered == 0
    assert cached.usage.requests == {"cache": 0, "sync": 2, "batch": 1}
    assert len(submitted) == 3


def test_failed_lines_requeued_by_batch_go_into_a_second_batch(server, monkeypatch, conversations, tmp_path):
    backend = hosted(server, monkeypatch, "anthropic", batch=True, batch_requeue="batch")
    cached = CachedBackend(backend, RequestCache(tmp_path / "requests.sqlite"))
    server.batches.line_faults = ["expired", None, "error"]
    replies = cached.generate(conversations, PARAMS)
    assert all(r.ok for r in replies)
    first, second = batch_keys_sent(server)
    assert second == [first[0], first[2]]
    assert not [r for r in server.requests() if r.path.rstrip("/").endswith("/v1/messages")]
    assert cached.batch.counts.requeued == 2 and cached.batch.counts.submitted == 2


def test_requeue_none_leaves_failed_lines_uncached_for_the_next_run(server, monkeypatch, conversations, tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    backend = hosted(server, monkeypatch, "openai", batch=True, batch_requeue="none")
    server.batches.line_faults = ["error"]
    first = CachedBackend(backend, cache).generate(conversations, PARAMS)
    assert [r.ok for r in first] == [False, True, True] and "scripted line failure" in first[0].error
    rerun = CachedBackend(backend, cache)
    assert all(r.ok for r in rerun.generate(conversations, PARAMS))
    assert batch_keys_sent(server)[1] == batch_keys_sent(server)[0][:1] and rerun.hits == 2


def test_a_batch_over_the_request_limit_is_split(server, monkeypatch, conversations, tmp_path):
    backend = hosted(server, monkeypatch, "openai", batch=True, batch_max_requests=2)
    cached = CachedBackend(backend, RequestCache(tmp_path / "requests.sqlite"))
    assert all(r.ok for r in cached.generate(conversations, PARAMS))
    assert [len(keys) for keys in batch_keys_sent(server)] == [2, 1]


def test_a_batch_still_running_is_left_in_flight_then_collected(server, monkeypatch, conversations, tmp_path):
    from narrative_eval.backends.batch import collect_open

    cache = RequestCache(tmp_path / "requests.sqlite")
    backend = hosted(server, monkeypatch, "anthropic", batch=True, batch_timeout=0.3)
    server.batches.hold = True
    waiting = CachedBackend(backend, cache).generate(conversations, PARAMS)
    assert all(not r.ok and r.error.startswith("still in flight") for r in waiting)
    assert len(cache.open_batches()) == 1 and server.batches.submissions == 1
    assert collect_open(cache, [backend.spec], lambda spec: backend)[0].endswith("in_progress, not finished")

    server.batches.hold = False
    [news] = collect_open(cache, [backend.spec], lambda spec: backend)
    assert "3 replies cached, 0 without a reply" in news and cache.open_batches() == []
    after = CachedBackend(backend, cache)
    assert all(r.cached for r in after.generate(conversations, PARAMS)) and server.batches.submissions == 1


def test_a_rerun_polls_the_batch_in_flight_instead_of_submitting_again(server, monkeypatch, conversations, tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    backend = hosted(server, monkeypatch, "openai", batch=True, batch_timeout=0.2)
    server.batches.hold = True
    CachedBackend(backend, cache).generate(conversations, PARAMS)
    server.batches.hold = False
    rerun = CachedBackend(backend, cache)
    assert all(r.ok for r in rerun.generate(conversations, PARAMS))
    assert server.batches.submissions == 1 and rerun.batch.counts.resumed == 1 and rerun.batch.counts.submitted == 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_auth_error_is_one_clear_message_and_not_retried(server, monkeypatch, conversations, tmp_path, provider):
    backend = hosted(server, monkeypatch, provider, key="wrong-key", batch=True)
    cached = CachedBackend(backend, RequestCache(tmp_path / "requests.sqlite"))
    replies = cached.generate(conversations, PARAMS)
    assert all(r.finish_reason == "error" and "authentication" in r.error and "wrong-key" not in r.error for r in replies)
    assert replies[0].error.startswith("batch submission failed: authentication")
    assert len(server.requests()) == 1 and server.batches.submissions == 0
    # Nothing more is sent once the key is known to be refused.
    later = cached.generate([conversations[0]], [GenerationParams(max_new_tokens=5, seed=9)])
    assert not later[0].ok and len(server.requests()) == 1


def test_an_expired_batch_is_reported_and_its_lines_requeued(server, monkeypatch, conversations, tmp_path, caplog):
    backend = hosted(server, monkeypatch, "openai", batch=True)
    cached = CachedBackend(backend, RequestCache(tmp_path / "requests.sqlite"))
    server.batches.expire_next = True
    with caplog.at_level("WARNING"):
        replies = cached.generate(conversations, PARAMS)
    assert all(r.ok for r in replies) and cached.usage.requests["sync"] == 3
    assert cached.batch.figures() == {"batches_submitted": 1, "batches_resumed": 0, "batch_requeued": 3, "batch_unanswered": 0}
    assert any("expired: 0 of 3 lines answered" in r.getMessage() for r in caplog.records)
