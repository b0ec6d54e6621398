"""A recording wrapper around a real backend: keeps every batch of conversations it was asked for."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from narrative_eval.backends.base import Backend, Conversation
from narrative_eval.records import GenerationParams, Message, Reply


class RecordingBackend(Backend):
    """Delegates every request to a real engine and records what was sent, one entry per generate() call.

    It takes one GenerationParams per conversation (per_request_params), so a whole turn of a
    delivery arrives as one call, as it does on a batching engine.
    """

    name = "recording"
    per_request_params = True

    def __init__(self, inner: Backend):
        super().__init__(inner.spec)
        self.inner = inner
        self.calls: list[list[list[Message]]] = []
        """Conversations of each generate() call, copied as sent."""
        self.params: list[list[GenerationParams]] = []
        """The params of each request of each call."""

    def identity(self) -> str:
        return self.inner.identity()

    def generate(self, conversations: Sequence[Conversation], params) -> list[Reply]:
        per_request = [params] * len(conversations) if isinstance(params, GenerationParams) else list(params)
        self.calls.append([list(c) for c in conversations])
        self.params.append(per_request)
        return [self.inner.generate([c], p)[0] for c, p in zip(conversations, per_request)]


@pytest.fixture
def recording_smollm2(smollm2):
    """The session's real SmolLM2 engine behind a fresh recorder."""
    pytest.importorskip("llama_cpp")
    return RecordingBackend(smollm2)
