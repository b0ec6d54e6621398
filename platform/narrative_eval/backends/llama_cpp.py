"""GGUF models through llama.cpp (the embedded default), with grammar-constrained JSON for judges.

One sequence at a time, on purpose. llama.cpp can decode several sequences in one batch, but not
while keeping a seeded reply independent of its neighbours: ggml's CPU kernels give a token's logits
that change with how many rows are multiplied together (the reason for block_aligned_llama below),
and a lone decoded token (one row) takes another kernel path than several (the embedded SmolLM2's
logits differ there), so a sequence decoded beside others would not get the logits it gets alone,
and its sampled reply would depend on which requests shared its steps. The platform's promise that the same spec and seed give
the same reply, in any order and on a rerun, would then hold only through the request cache. The
engine that batches is vLLM (the `vllm` backend, or `vllm serve` through `openai_compatible`).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import math
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from narrative_eval.backends.base import Backend, Conversation, backend, params_per_request, usable_cores
from narrative_eval.records import GenerationParams, ModelSpec, Reply, TokenLogprob
from narrative_eval.weights import default_chat_format, file_digest, resolve_weights


PREFIX_BLOCK = 8
"""Grain of prefix reuse: a reused prompt prefix is cut back to a multiple of this many tokens, and at
least this many prompt tokens are read again."""

DEFAULT_N_BATCH = 512
"""llama.cpp's own default chunk for reading a prompt; short prompts are read in one chunk."""


def reuse_point(shared: int, length: int, block: int = PREFIX_BLOCK) -> int:
    """How many cached tokens of a `length`-token prompt to keep when its first `shared` are cached.

    A multiple of `block`, leaving at least `block` tokens to read (see block_aligned_llama); 0 for a
    prompt shorter than two blocks.
    """
    return max(0, min(shared, length - block) // block * block)


def block_aligned_llama(llama_class: type, block: int = PREFIX_BLOCK) -> type:
    """A llama_cpp.Llama whose prefix reuse leaves every logit as a fresh read of the prompt gives it.

    Reusing the previous prompt's KV prefix saves re-reading it (prompt reading dominates on CPU, and
    every turn of a multi-turn conversation starts with the whole history). But ggml's CPU kernels
    multiply some matrices a few rows at a time, and take other paths for a chunk of only a few rows,
    so a prompt token's logits can change (by tenths, for the embedded Gemma 3) with where the read
    starts. Starting it at a multiple of 8 tokens, with at least 8 tokens left to read, keeps the
    results bit for bit those of a fresh read, so a seeded reply does not depend on which request
    ran before it. tests/backends/test_llama_cpp_backend.py checks the logits of both embedded models.
    """

    class BlockAlignedLlama(llama_class):
        prefix_block = block

        def _init_sampler(self, *args, **settings):
            penalties = [settings.get(name) for name in ("repeat_penalty", "frequency_penalty", "presence_penalty")]
            # Anything but the case this was checked against (greedy, a grammar, no logits processor, every setting
            # passed by name, as llama-cpp-python's generate and sample do) keeps llama-cpp-python's own sampler.
            if args or settings.get("grammar") is None or settings.get("temp") != 0.0 \
                    or settings.get("logits_processor") is not None or None in penalties:
                return super()._init_sampler(*args, **settings)
            return GrammarCheckedGreedy(self, settings["grammar"], *penalties)

        def generate(self, tokens, *args, reset: bool = True, **kwargs):
            if reset and self.n_tokens > 0:
                shared = 0
                for cached, token in zip(self._input_ids, tokens):
                    if cached != token:
                        break
                    shared += 1
                self.n_tokens = reuse_point(shared, len(tokens), self.prefix_block)
            yield from super().generate(tokens, *args, reset=reset, **kwargs)

    return BlockAlignedLlama


class GrammarCheckedGreedy:
    """Greedy decoding under a grammar (a judge's JSON schema) that checks only the token greedy picks.

    llama-cpp-python's sampler applies the grammar to every token of the vocabulary at every step
    (6 ms a token for the embedded SmolLM2's 49,152, a quarter of the time of each replied token). The
    best token overall, when the grammar allows it, is also the best the grammar allows, so it is
    checked alone, and the whole vocabulary is filtered only when it is refused: the same token,
    bit for bit, as the grammar applied first (ties go to the lowest id either way; penalties and
    the grammar's -inf commute). llama.cpp's own server samples the same way.
    `tests/backends/test_llama_cpp_backend.py` compares both on the embedded models.
    """

    def __init__(self, llama, grammar, repeat_penalty: float, frequency_penalty: float, presence_penalty: float):
        from llama_cpp import _internals, llama_cpp

        self._c = llama_cpp
        self.choose = _internals.LlamaSampler()
        self.choose.add_penalties(n_vocab=llama.n_vocab(), penalty_last_n=llama.last_n_tokens_size,
                                  penalty_repeat=repeat_penalty, penalty_freq=frequency_penalty,
                                  penalty_present=presence_penalty)
        self.choose.add_greedy()
        self.grammar = _internals.LlamaSampler()
        self.grammar.add_grammar(llama._model, grammar)
        self.n_vocab = llama.n_vocab()
        self.neutral = repeat_penalty == 1.0 and frequency_penalty == 0.0 and presence_penalty == 0.0
        self.candidates = (llama_cpp.llama_token_data * self.n_vocab)()
        self.table = np.ctypeslib.as_array(self.candidates)
        self.ids = np.arange(self.n_vocab, dtype=self.table["id"].dtype)
        self.one = (llama_cpp.llama_token_data * 1)()
        self.refused = 0
        """Steps where the grammar refused greedy's first choice and the whole vocabulary was filtered."""

    def _best(self, ctx, idx: int, constrained: bool) -> int:
        logits = np.ctypeslib.as_array(self._c.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        if not constrained and self.neutral:
            return int(np.argmax(logits))  # the first highest logit, as llama.cpp's greedy picks it
        self.table["id"] = self.ids
        self.table["logit"] = logits
        self.table["p"] = 0.0
        array = self._c.llama_token_data_array(data=self.candidates, size=self.n_vocab, selected=-1, sorted=False)
        if constrained:
            self._c.llama_sampler_apply(self.grammar.sampler, ctypes.byref(array))
        self._c.llama_sampler_apply(self.choose.sampler, ctypes.byref(array))
        return int(self.candidates[array.selected].id)

    def _allowed(self, token: int) -> bool:
        self.one[0].id, self.one[0].logit, self.one[0].p = token, 0.0, 0.0
        array = self._c.llama_token_data_array(data=self.one, size=1, selected=-1, sorted=False)
        self._c.llama_sampler_apply(self.grammar.sampler, ctypes.byref(array))
        return math.isfinite(self.one[0].logit)

    def sample(self, ctx, idx: int = -1) -> int:
        """The next token (the interface of llama-cpp-python's own sampler, which `Llama.sample` calls)."""
        token = self._best(ctx, idx, constrained=False)
        if not self._allowed(token):
            self.refused += 1
            token = self._best(ctx, idx, constrained=True)
        self._c.llama_sampler_accept(self.choose.sampler, token)
        self._c.llama_sampler_accept(self.grammar.sampler, token)
        return token


class LogprobRecorder:
    """The log-probabilities of every token a request's samplers pick, with the `top` most probable at each step.

    llama-cpp-python returns log-probabilities only from a model loaded with `logits_all`, which keeps the logits of
    every prompt token (n_ctx x vocabulary floats) and changes how prompts are read. Instead the sampler is watched:
    before it picks, the logits it picks from are read (the model's distribution, before the grammar, penalties and
    temperature, as OpenAI's and vLLM's log-probabilities are) and the picked token's log-probability kept. The
    sampler itself is untouched, so the reply is the one the same request without log-probabilities gets.
    """

    def __init__(self, llama, top: int):
        from llama_cpp import llama_cpp

        self._c = llama_cpp
        self.llama = llama
        self.top = top
        self.n_vocab = llama.n_vocab()
        self.steps: list[TokenLogprob] = []

    def watching(self, sampler):
        """`sampler` reporting each pick here (the one method llama-cpp-python calls on it is `sample`)."""
        recorder = self

        class Watched:
            def sample(self, ctx, idx: int = -1) -> int:
                logits = np.ctypeslib.as_array(recorder._c.llama_get_logits_ith(ctx.ctx, idx), shape=(recorder.n_vocab,))
                logprobs = logits.astype(np.float64)
                logprobs -= logprobs.max()
                logprobs -= np.log(np.exp(logprobs).sum())
                token = sampler.sample(ctx, idx)
                recorder.record(token, logprobs)
                return token

        return Watched()

    def _text(self, token: int) -> str:
        return self.llama.detokenize([token]).decode("utf-8", errors="replace")

    def record(self, token: int, logprobs: np.ndarray) -> None:
        best = np.argpartition(-logprobs, min(self.top, self.n_vocab - 1))[: self.top]
        top: dict[str, float] = {}
        for candidate in sorted(best.tolist(), key=lambda t: -logprobs[t]) + [token]:
            top.setdefault(self._text(candidate), float(logprobs[candidate]))
        self.steps.append(TokenLogprob(token=self._text(token), logprob=float(logprobs[token]), top=top))


def recording_llama(llama_class: type) -> type:
    """A llama_cpp.Llama whose samplers report each pick to its `recorder` while one is set (see LogprobRecorder)."""

    class RecordingLlama(llama_class):
        recorder: LogprobRecorder | None = None
        """Set while a request asks for log-probabilities: every sampler the model makes then reports to it."""

        def _init_sampler(self, *args, **settings):
            sampler = super()._init_sampler(*args, **settings)
            return sampler if self.recorder is None else self.recorder.watching(sampler)

    return RecordingLlama


def chat_completion(llm, top_logprobs: int = 0, **kwargs) -> tuple[dict, list[TokenLogprob] | None]:
    """`llm.create_chat_completion(**kwargs)` on a recording_llama, and the reply's tokens with their log-probabilities
    and `top_logprobs` alternatives each when asked (None when not)."""
    recorder = llm.recorder = LogprobRecorder(llm, top_logprobs) if top_logprobs else None
    try:
        out = llm.create_chat_completion(**kwargs)
    finally:
        llm.recorder = None
    if recorder is None:
        return out, None
    # The step that picked the end-of-sequence token is not part of the reply.
    return out, recorder.steps[: (out.get("usage") or {}).get("completion_tokens", 0)]


@backend("llama_cpp")
class LlamaCppBackend(Backend):
    supports_json_schema = True
    per_request_params = True
    sequential = True
    repeats_greedy = True  # one sequence at a time, prefix reuse block-aligned: greedy replies are bit for bit
    score_logprobs = True

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        from llama_cpp import Llama

        self.path = resolve_weights(spec.weights)
        if not Path(self.path).is_file():
            raise FileNotFoundError(f"GGUF file not found for model {spec.id!r}: {self.path}")
        options = dict(spec.options)
        self.n_ctx = self.context_window = int(options.pop("n_ctx", 4096))
        threads = int(options.pop("n_threads", usable_cores()))
        # Prompts are read with as many threads as replies are written: llama-cpp-python's own default for reading is
        # the machine's core count, whatever the process may use, and those threads spin waiting for a core.
        batch_threads = int(options.pop("n_threads_batch", threads))
        n_batch = int(options.pop("n_batch", DEFAULT_N_BATCH))
        prefix_block = int(options.pop("prefix_block", PREFIX_BLOCK))
        if prefix_block % 8 or n_batch % prefix_block:
            raise ValueError(f"model {spec.id!r}: prefix_block must be a multiple of 8 and divide n_batch "
                             f"(got prefix_block={prefix_block}, n_batch={n_batch})")
        chat_format = spec.chat_format or default_chat_format(spec.weights)
        # llama.cpp prints its load log on stderr; keep the terminal readable.
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            self.llm = recording_llama(block_aligned_llama(Llama, prefix_block))(
                model_path=self.path,
                n_ctx=self.n_ctx,
                n_threads=threads,
                n_threads_batch=batch_threads,
                n_batch=min(n_batch, self.n_ctx // prefix_block * prefix_block),
                chat_format=chat_format,
                verbose=False,
                **options,
            )

    def identity(self) -> str:
        stat = os.stat(self.path)
        return "sha256:" + file_digest(self.path, stat.st_size, stat.st_mtime)

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

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
        per_request = params_per_request(conversations, params)
        replies = []
        # llama.cpp serves one sequence at a time; a batch is a loop with per-request settings.
        for conversation, params in zip(conversations, per_request):
            messages = [m.model_dump() for m in conversation]
            start = time.perf_counter()
            try:
                out, logprobs = chat_completion(self.llm, params.top_logprobs, messages=messages, **self._kwargs(params))
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
                    logprobs=logprobs,
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
