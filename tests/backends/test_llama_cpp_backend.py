"""The llama_cpp backend on the embedded SmolLM2 GGUF."""

from __future__ import annotations

import math
import contextlib
import json
import os

import numpy as np
import pytest

from narrative_eval.backends.base import usable_cores
from narrative_eval.backends.llama_cpp import DEFAULT_N_BATCH, PREFIX_BLOCK, LlamaCppBackend, reuse_point
from narrative_eval.records import GenerationParams, Message, ModelSpec
from narrative_eval.weights import embedded_path


def test_batch_of_conversations(llama_backend, conversations):
    replies = llama_backend.generate(conversations, GenerationParams(temperature=0.0, max_new_tokens=24))
    assert len(replies) == len(conversations)
    for reply in replies:
        assert reply.ok and reply.text.strip()
        assert reply.finish_reason in ("stop", "length")
        assert reply.prompt_tokens > 0 and 0 < reply.completion_tokens <= 24
    # The multi-turn conversation carries more prompt than the one-line question.
    assert replies[2].prompt_tokens > replies[1].prompt_tokens


def test_json_schema_is_enforced(llama_backend, judge_schema):
    conversation = [Message(role="user", content="Rate the sentence 'The cat sat.' from 1 to 5 and explain why.")]
    reply = llama_backend.generate([conversation], GenerationParams(temperature=0.0, max_new_tokens=80, json_schema=judge_schema))[0]
    verdict = json.loads(reply.text)
    assert isinstance(verdict["score"], int) and isinstance(verdict["reason"], str)


@pytest.mark.parametrize("model", ["smollm2-135m-instruct", "gemma3-270m"])
def test_greedy_under_a_schema_gives_the_tokens_of_the_grammar_applied_first(model, judge_schema):
    """The backend checks only greedy's first choice against a judge's JSON grammar; its replies are, token for token,
    those of llama-cpp-python's own sampler, which filters the whole vocabulary at every step, including at the steps
    where the grammar refuses that first choice."""
    from llama_cpp import Llama

    from narrative_eval.backends.llama_cpp import GrammarCheckedGreedy

    spec = ModelSpec(id=f"{model}-grammar", weights=f"embedded:{model}", options={"n_ctx": 1024, "n_threads": 1})
    backend = LlamaCppBackend(spec)
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        stock = Llama(model_path=str(embedded_path(model)), n_ctx=1024, n_threads=1, n_threads_batch=1,
                      chat_format=backend.llm.chat_format, verbose=False)
    params = GenerationParams(temperature=0.0, max_new_tokens=32, json_schema=judge_schema)
    prompt = "Rate the sentence 'The cat sat.' from 1 to 5 and explain why."
    try:
        [reply] = backend.generate([[Message(role="user", content=prompt)]], params)
        sampler = backend.llm._sampler
        expected = stock.create_chat_completion(messages=[{"role": "user", "content": prompt}], **backend._kwargs(params))
    finally:
        backend.close()
        stock.close()
    assert isinstance(sampler, GrammarCheckedGreedy) and sampler.refused > 0
    assert reply.completion_tokens == expected["usage"]["completion_tokens"] > 8
    assert reply.text == expected["choices"][0]["message"]["content"]


def test_stream_matches_greedy_generation(llama_backend, conversations):
    params = GenerationParams(temperature=0.0, max_new_tokens=20)
    pieces = list(llama_backend.stream(conversations[0], params))
    assert len(pieces) > 1
    assert "".join(pieces) == llama_backend.generate([conversations[0]], params)[0].text


def test_seed_reproducible_at_positive_temperature(llama_backend, conversations):
    def sample(seed: int) -> str:
        params = GenerationParams(temperature=1.0, max_new_tokens=24, seed=seed)
        return llama_backend.generate([conversations[0]], params)[0].text

    assert sample(7) == sample(7)
    assert len({sample(seed) for seed in (1, 2, 3)}) > 1


def test_context_overflow_is_a_length_error():
    backend = LlamaCppBackend(ModelSpec(id="smollm2-tiny-ctx", weights="embedded:smollm2-135m-instruct", options={"n_ctx": 64}))
    try:
        long_prompt = [Message(role="user", content="tell me a story " * 60)]
        reply = backend.generate([long_prompt], GenerationParams(max_new_tokens=16))[0]
    finally:
        backend.close()
    assert reply.finish_reason == "length" and reply.error and not reply.ok


def test_release_forgets_one_loaded_backend():
    """release(spec) closes that spec's backend only; the next get_backend loads a fresh one."""
    from narrative_eval.backends import get_backend, release

    spec = ModelSpec(id="smollm2-released", weights="embedded:smollm2-135m-instruct", options={"n_ctx": 256})
    other = ModelSpec(id="smollm2-kept", weights="embedded:smollm2-135m-instruct", options={"n_ctx": 320})
    first, kept = get_backend(spec), get_backend(other)
    assert get_backend(spec) is first
    release(spec)
    again = get_backend(spec)
    try:
        assert again is not first and get_backend(other) is kept
        params = GenerationParams(temperature=0.0, max_new_tokens=4)
        assert again.generate([[Message(role="user", content="Hello")]], params)[0].ok
    finally:
        release(spec)
        release(other)
    release(spec)  # nothing loaded: nothing to do


def test_prefix_reuse_is_block_aligned_and_does_not_depend_on_request_order():
    """Requests sharing a long system prompt read only what follows the last shared block, and a seeded
    reply is the same whether its prefix came from the cache or was read fresh, in any order."""
    spec = ModelSpec(id="smollm2-prefix", weights="embedded:smollm2-135m-instruct", options={"n_ctx": 2048})
    system = Message(role="system", content="You are a careful storyteller. " * 25)
    questions = ["Name a color.", "Name a fruit.", "Name a city.", "Name an animal."]
    conversations = [[system, Message(role="user", content=q)] for q in questions]
    params = [GenerationParams(temperature=0.9, max_new_tokens=16, seed=11 + i) for i in range(len(questions))]
    backend, fresh = LlamaCppBackend(spec), LlamaCppBackend(spec)
    try:
        reads: list[int] = []
        evaluate = backend.llm.eval
        backend.llm.eval = lambda tokens: (reads.append(len(tokens)) if len(tokens) > 1 else None, evaluate(tokens))[1]
        forward = backend.generate(conversations, params)
        prompt_sizes = [reply.prompt_tokens for reply in forward]
        assert reads[0] == prompt_sizes[0]
        for size, read in zip(prompt_sizes[1:], reads[1:]):
            assert read < size and (size - read) % backend.llm.prefix_block == 0
        backward = backend.generate(conversations[::-1], params[::-1])[::-1]
        alone = []
        for conversation, p in zip(conversations, params):
            fresh.llm.reset()
            alone.append(fresh.generate([conversation], p)[0])
    finally:
        backend.close()
        fresh.close()
    assert [r.text for r in forward] == [r.text for r in backward] == [r.text for r in alone]
    assert len({r.text for r in forward}) > 1


@pytest.mark.parametrize("model", ["smollm2-135m-instruct", "gemma3-270m"])
def test_aligned_prefix_reuse_gives_the_logits_of_a_fresh_read(model):
    """Reading a prompt on top of the cached prefix that reuse_point keeps gives, bit for bit, the logits
    of a fresh read (Gemma's differ by tenths at other cut points). The last token attends to every
    row read, so equal logits there mean the reuse changed none of them."""
    from llama_cpp import Llama

    threads = usable_cores()  # for reading too: llama-cpp-python's default there is every core of the machine
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        llm = Llama(model_path=str(embedded_path(model)), n_ctx=2048, n_batch=DEFAULT_N_BATCH, n_threads=threads,
                    n_threads_batch=threads, verbose=False)

    def last_logits() -> np.ndarray:
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()

    try:
        story = "The lighthouse keeper counted the ships that passed each night, and wrote their names down. " * 60
        tokens = llm.tokenize(story.encode())
        assert len(tokens) > 600
        # Within one chunk and across the chunk boundary; shared up to the end, or ending mid-block.
        cases = [(96 + tail, 96 + tail) for tail in (1, 3, 6, 8)] + [(150, 100), (600, 600)]
        for length, shared in cases:
            prompt, cut = tokens[:length], reuse_point(shared, length)
            assert cut % PREFIX_BLOCK == 0 and length - cut >= PREFIX_BLOCK
            llm.reset()
            llm.eval(prompt)
            fresh = last_logits()
            # Leave a different continuation in the cache after the kept prefix, as a previous request would.
            llm.reset()
            llm.eval(prompt[:cut] + tokens[-30:])
            llm.n_tokens = cut
            llm.eval(prompt[cut:])
            assert np.array_equal(fresh, last_logits()), (model, length, shared, cut)
    finally:
        llm.close()


def test_reuse_point():
    assert reuse_point(shared=100, length=200) == 96
    assert reuse_point(shared=200, length=200) == 192
    assert reuse_point(shared=195, length=200) == 192
    assert reuse_point(shared=197, length=200) == 192 and reuse_point(shared=200, length=201) == 192
    assert reuse_point(shared=10, length=12) == 0


def test_log_probabilities_come_with_the_reply_it_gets_without_them(llama_backend, conversations, judge_schema):
    """A request asking for token log-probabilities gets the same reply, each token with its log-probability and the
    most probable tokens at its position (the sampler is watched, not changed)."""
    params = GenerationParams(temperature=0.0, max_new_tokens=24, json_schema=judge_schema)
    [plain] = llama_backend.generate([conversations[0]], params)
    [asked] = llama_backend.generate([conversations[0]], params.model_copy(update={"top_logprobs": 5}))
    assert asked.text == plain.text and plain.logprobs is None
    assert len(asked.logprobs) == asked.completion_tokens and "".join(t.token for t in asked.logprobs) == asked.text
    for step in asked.logprobs:
        assert step.logprob <= 0 and step.top[step.token] == step.logprob and len(step.top) <= 6
        assert sum(math.exp(value) for value in step.top.values()) <= 1 + 1e-9
