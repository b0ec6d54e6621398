"""The llama_cpp backend on the embedded SmolLM2 GGUF."""

from __future__ import annotations

import json

from narrative_eval.backends.llama_cpp import LlamaCppBackend
from narrative_eval.records import GenerationParams, Message, ModelSpec


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


def test_prefix_reuse_is_block_aligned_and_does_not_depend_on_request_order():
    """Requests sharing a long system prompt read only what follows the last shared 64-token block, and a
    seeded reply is the same whether its prefix came from the cache or was read fresh, in any order."""
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
            assert read < size and (size - read) % backend.llm.n_batch == 0
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
