"""Batch mode of the hosted backends against the local server's batch endpoints, through the real SDKs.

The server answers batch lines with the same code as synchronous requests (real SmolLM2 generations),
scripts line failures and expiry, holds batches in progress, and counts submissions.
"""

from __future__ import annotations

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
