"""The one backend interface: conversations in, replies out."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from narrative_eval.records import GenerationParams, Message, ModelSpec, Reply
from narrative_eval.registry import Registry

Conversation = Sequence[Message]

BACKENDS: Registry[type["Backend"]] = Registry(
    "backend",
    # Importing these reads no engine: each imports its engine (llama_cpp, torch, vllm, SDKs) when a model loads.
    modules=tuple(
        f"narrative_eval.backends.{module}"
        for module in ("llama_cpp", "transformers_backend", "vllm_backend", "openai_compatible", "openai_backend", "anthropic_backend")
    ),
)
"""Backend name -> Backend class (ModelSpec.backend names one)."""


def usable_cores() -> int:
    """The cores this process may run on: fewer than the machine has under a cpuset, taskset or container limit,
    where a thread per machine core would leave threads waiting on each other for a core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def backend(name: str):
    """Register a Backend subclass under `name` (its `name` attribute is set to match)."""

    def register(backend_class: type[Backend]) -> type[Backend]:
        backend_class.name = name
        BACKENDS.add(name, backend_class)
        return backend_class

    return register


def params_per_request(
    conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
) -> list[GenerationParams]:
    """One GenerationParams per conversation, from one shared set or a list that must match in length."""
    per_request = [params] * len(conversations) if isinstance(params, GenerationParams) else list(params)
    if len(per_request) != len(conversations):
        raise ValueError("one GenerationParams per conversation is required when a list is given")
    return per_request


class Backend(ABC):
    """An inference engine bound to one model.

    Subclasses implement `generate` for a batch of conversations; `stream` is optional
    (used by the app's live fill). `identity` names the exact weights so the request
    cache never serves one model's reply for another.
    """

    name: str = ""
    supports_seed: bool = True
    supports_json_schema: bool = False
    per_request_params: bool = False
    """True when generate() accepts one GenerationParams per conversation (a list); otherwise callers
    group requests by identical params (CachedBackend does this)."""
    sequential: bool = False
    """True when the engine serves one conversation at a time and reuses the previous prompt's cached
    prefix: a multi-turn driver should then run each conversation to its end before the next."""

    batch_size: int = 8
    """Requests a study hands to one generate() call. Batching engines raise it (model option
    `batch_size`); a SIGKILL loses at most the replies of one chunk that `replies_as_done` has not
    yielded yet (a whole chunk for an engine that batches it, the requests in flight for a server)."""
    context_window: int | None = None
    """Tokens one request may hold (prompt and reply together), when the engine says; None when unknown."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec

    def run_params(self) -> dict[str, str]:
        """Engine settings a cell logs as run params because they can change replies (engine version, batching)."""
        return {}

    def identity(self) -> str:
        """Exact model identity for the cache key (weights digest, revision or API model name)."""
        return self.spec.weights

    @abstractmethod
    def generate(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        """Generate one reply per conversation. Failures come back as replies with `error` set."""

    def replies_as_done(
        self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
    ) -> Iterator[list[tuple[int, Reply]]]:
        """generate()'s replies in groups as they finish, each with its conversation's index (the request
        cache stores each group as it comes). An engine that batches the chunk yields it as one group."""
        yield list(enumerate(self.generate(conversations, params)))

    def count_tokens(self, text: str) -> int | None:
        """Tokens `text` takes in this model's tokenizer; None when the engine has no local tokenizer."""
        return None

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        """Yield the reply in pieces; engines without streaming yield it whole."""
        yield self.generate([conversation], params)[0].text

    def close(self) -> None:
        """Release the model."""
