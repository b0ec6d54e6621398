"""GGUF models through llama.cpp (the embedded default), with grammar-constrained JSON for judges."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

from narrative_eval.backends.base import Backend, Conversation
from narrative_eval.embedded import default_chat_format, resolve_weights
from narrative_eval.records import GenerationParams, ModelSpec, Reply


PREFIX_BLOCK = 16
"""Default n_batch: on CPU, reading a prompt in chunks of 16 tokens is as fast as in chunks of 512, and a
small chunk lets more of a shared prefix (system prompt, conversation history) be reused."""


@cache
def file_digest(path: str, size: int, mtime: float) -> str:
    """sha256 of a weights file (memoised on path, size and mtime)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def block_aligned_llama(llama_class: type) -> type:
    """A llama_cpp.Llama that reuses the previous prompt's KV prefix only up to a multiple of n_batch.

    Reusing a cached prefix saves re-reading it (prompt reading dominates on CPU, and every turn of
    a multi-turn conversation starts with the whole history). llama.cpp reads a prompt in chunks of
    n_batch tokens from the first uncached position, and a chunk's shape can change the logits'
    last bits; cutting the reused prefix back to a chunk boundary keeps every chunk where a fresh
    read would put it, so a seeded reply does not depend on which request ran before it.
    """

    class BlockAlignedLlama(llama_class):
        def generate(self, tokens, *args, reset: bool = True, **kwargs):
            if reset and self.n_tokens > 0:
                shared = 0
                for cached, token in zip(self._input_ids, tokens):
                    if cached != token:
                        break
                    shared += 1
                # At least one prompt token is always read again, so the logits are fresh.
                self.n_tokens = (min(shared, len(tokens) - 1) // self.n_batch) * self.n_batch
            yield from super().generate(tokens, *args, reset=reset, **kwargs)

    return BlockAlignedLlama


class LlamaCppBackend(Backend):
    name = "llama_cpp"
    supports_json_schema = True
    per_request_params = True
    sequential = True

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        from llama_cpp import Llama

        self.path = resolve_weights(spec.weights)
        if not Path(self.path).is_file():
            raise FileNotFoundError(f"GGUF file not found for model {spec.id!r}: {self.path}")
        options = dict(spec.options)
        self.n_ctx = int(options.pop("n_ctx", 4096))
        threads = int(options.pop("n_threads", os.cpu_count() or 1))
        # The chunk size of prompt reading, and with it the grain of prefix reuse (see block_aligned_llama).
        n_batch = int(options.pop("n_batch", PREFIX_BLOCK))
        chat_format = spec.chat_format or default_chat_format(spec.weights)
        # llama.cpp prints its load log on stderr; keep the terminal readable.
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            self.llm = block_aligned_llama(Llama)(
                model_path=self.path,
                n_ctx=self.n_ctx,
                n_threads=threads,
                n_batch=min(n_batch, self.n_ctx),
                chat_format=chat_format,
                verbose=False,
                **options,
            )

    def identity(self) -> str:
        stat = os.stat(self.path)
        return "sha256:" + file_digest(self.path, stat.st_size, stat.st_mtime)

    def _kwargs(self, params: GenerationParams) -> dict:
        kwargs = dict(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
        )
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if params.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": params.json_schema}
        return kwargs

    def generate(
        self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
    ) -> list[Reply]:
        per_request = [params] * len(conversations) if isinstance(params, GenerationParams) else list(params)
        replies = []
        # llama.cpp serves one sequence at a time; a batch is a loop with per-request settings.
        for conversation, params in zip(conversations, per_request):
            messages = [m.model_dump() for m in conversation]
            start = time.perf_counter()
            try:
                out = self.llm.create_chat_completion(messages=messages, **self._kwargs(params))
            except ValueError as error:  # prompt longer than the context window
                replies.append(Reply(text="", finish_reason="length", error=f"{type(error).__name__}: {error}"))
                continue
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            replies.append(
                Reply(
                    text=choice["message"].get("content") or "",
                    finish_reason=choice.get("finish_reason") or "stop",
                    prompt_tokens=usage.get("prompt_tokens", 0),
                    completion_tokens=usage.get("completion_tokens", 0),
                    seconds=time.perf_counter() - start,
                )
            )
        return replies

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        messages = [m.model_dump() for m in conversation]
        for chunk in self.llm.create_chat_completion(messages=messages, stream=True, **self._kwargs(params)):
            piece = chunk["choices"][0]["delta"].get("content")
            if piece:
                yield piece

    def close(self) -> None:
        with contextlib.suppress(Exception), contextlib.redirect_stderr(io.StringIO()):
            self.llm.close()
