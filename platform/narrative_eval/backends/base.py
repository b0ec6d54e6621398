"""The one backend interface: conversations in, replies out."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (False without torch)."""
    try:
        import torch  # an optional heavy engine: only the torch-based backends ask
    except ImportError:
        return False
    return torch.cuda.is_available()


def usable_cores() -> int:
    """The compute threads an engine of this process should start: the cores it may run on (fewer than the machine has
    under a cpuset, taskset or container limit, where a thread per machine core would leave threads waiting on each
    other for a core), and no more than OMP_NUM_THREADS where the environment sets it, as torch and BLAS read it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(cores, int(limit)) if limit.isdigit() and int(limit) > 0 else cores


def backend(name: str):
    """Register a Backend subclass under `name` (its `name` attribute is set to match)."""

    def register(backend_class: type[Backend]) -> type[Backend]:
        backend_class.name = name
        BACKENDS.add(name, backend_class)
        return backend_class

    return register


@dataclass(frozen=True)
class SlowStart:
    """How long a model takes to load, for a backend slow enough to say so before it starts."""

    seconds: float
    """Typical seconds from the start of the load to the first request."""
    note: str
    """Said beside the model in a list, e.g. 'vLLM on CPU: about a minute to start'."""


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
    repeats_greedy: bool = False
    """True when a greedy (temperature 0) request always gets the same reply, whatever its seed: a judge does not
    retry such a reply when it fails validation, since the retry would repeat it."""

    batch_size: int = 8
    """Requests a study hands to one generate() call. Batching engines raise it (model option
    `batch_size`); a SIGKILL loses at most the replies of one chunk that `replies_as_done` has not
    yielded yet (a whole chunk for an engine that batches it, the requests in flight for a server)."""
    context_window: int | None = None
    """Tokens one request may hold (prompt and reply together), when the engine says; None when unknown."""

    # Capabilities, read from the class (the registry's entry) before any model loads: configs, the Ray
    # executor and the app ask them of a backend name, so a plugin backend declares its own.
    hosted: bool = False
    """True when the model runs behind an API elsewhere: loading it starts no engine here and needs no local weights."""
    score_logprobs: bool = False
    """True when a reply can carry its tokens' log-probabilities with the most probable alternatives at each position
    (`GenerationParams.top_logprobs`): what a judge with `scoring: expected` reads its probability-weighted scores from."""

    @classmethod
    def key_env(cls, spec: ModelSpec) -> str | None:
        """The environment variable that must hold an API key for this model; None when it needs none."""
        return None

    @classmethod
    def gpus_for(cls, spec: ModelSpec) -> int:
        """GPUs one loaded instance of this model holds (a Ray cell reserves them); 0 on CPU or behind an API."""
        return 0

    @classmethod
    def device_need(cls, spec: ModelSpec) -> str | None:
        """What this machine lacks to run the model's engine, said briefly ('needs a CUDA GPU (...)'); None when it
        has it. Loads nothing."""
        return None

    @classmethod
    def slow_start(cls, spec: ModelSpec) -> SlowStart | None:
        """How long loading this model takes when it is long enough to warn about; None when it loads in seconds."""
        return None

    @classmethod
    def batchable(cls) -> bool:
        """True when the backend has a provider batch API (it overrides `batch_api`)."""
        return cls.batch_api is not Backend.batch_api


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

    def batch_api(self) -> Any:
        """The provider's batch wire format (submit, status, results: batch_providers.py); batchable backends only."""
        raise NotImplementedError(f"the {self.name} backend has no batch API")

    def count_tokens(self, text: str) -> int | None:
        """Tokens `text` takes in this model's tokenizer; None when the engine has no local tokenizer."""
        return None

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        """Yield the reply in pieces; engines without streaming yield it whole."""
        yield self.generate([conversation], params)[0].text

    def close(self) -> None:
        """Release the model."""


T = TypeVar("T")


def in_batches(items: Sequence[T], backend: Any, progress: Callable[[list[list[T]], str, int], Iterable[list[T]]] | None = None,
               label: str = "") -> Iterable[list[T]]:
    """`items` in consecutive batches of the backend's `batch_size`, reported to `progress` (items, label, total) under
    `label` when given: how every loop of the library hands work to an engine or a judge."""
    size = max(1, int(backend.batch_size))
    batches = [list(items[i : i + size]) for i in range(0, len(items), size)]
    return progress(batches, label, len(batches)) if progress is not None else batches
