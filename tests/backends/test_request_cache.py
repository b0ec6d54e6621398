"""The SQLite request cache in front of a real engine."""

from __future__ import annotations

import pytest

from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.records import GenerationParams


def test_second_identical_batch_generates_nothing(llama_backend, conversations, tmp_path):
    params = GenerationParams(temperature=0.7, max_new_tokens=16, seed=11)
    first = CachedBackend(llama_backend, RequestCache(tmp_path / "requests.sqlite"))
    replies = first.generate(conversations, params)
    assert first.generated == len(conversations) and first.hits == 0

    # A new process would open the same file: a fresh cache object and wrapper.
    rerun = CachedBackend(llama_backend, RequestCache(tmp_path / "requests.sqlite"))
    again = rerun.generate(conversations, params)
    assert rerun.generated == 0 and rerun.hits == len(conversations)
    assert [r.text for r in again] == [r.text for r in replies]
    assert all(r.cached for r in again)


def test_different_seeds_are_different_requests(llama_backend, conversations, tmp_path):
    one, two = GenerationParams(seed=1), GenerationParams(seed=2)
    assert request_key(llama_backend, conversations[0], one) != request_key(llama_backend, conversations[0], two)
    assert request_key(llama_backend, conversations[0], one) == request_key(llama_backend, conversations[0], GenerationParams(seed=1))

    cached = CachedBackend(llama_backend, RequestCache(tmp_path / "requests.sqlite"))
    cached.generate(conversations[:1], GenerationParams(max_new_tokens=8, seed=1))
    cached.generate(conversations[:1], GenerationParams(max_new_tokens=8, seed=2))
    assert cached.generated == 2 and cached.hits == 0


def test_a_params_list_that_does_not_match_the_conversations_is_refused(llama_backend, conversations, tmp_path):
    cached = CachedBackend(llama_backend, RequestCache(tmp_path / "requests.sqlite"))
    with pytest.raises(ValueError, match="one GenerationParams per conversation"):
        cached.generate(conversations, [GenerationParams(seed=1)])
    # The engine itself refuses too, rather than answering only the conversations the list covers.
    with pytest.raises(ValueError, match="one GenerationParams per conversation"):
        llama_backend.generate(conversations, [GenerationParams(seed=1)])
    assert cached.generated == 0
