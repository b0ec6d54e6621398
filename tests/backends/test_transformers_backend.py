"""The transformers backend on SmolLM2 loaded from the embedded GGUF (dequantized); quantized loads are in test_quantized_torch.py."""

from __future__ import annotations

import pytest

from narrative_eval.records import GenerationParams, Message, ModelSpec

pytest.importorskip("transformers")
pytest.importorskip("gguf", reason="transformers needs the gguf package to read GGUF files")

SMOLLM = "embedded:smollm2-135m-instruct"


def spec(quantization: str | None = None, weights: str = SMOLLM, **options) -> ModelSpec:
    return ModelSpec(id=f"smollm2-{quantization or 'bf16'}", backend="transformers", weights=weights,
                     quantization=quantization, options={"batch_size": 4, **options})


@pytest.fixture(scope="module")
def plain():
    from narrative_eval.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(spec())
    yield backend
    backend.close()


def test_batch_of_conversations(plain, conversations):
    replies = plain.generate(conversations, GenerationParams(temperature=0.0, max_new_tokens=20))
    assert len(replies) == 3 and all(r.ok and r.text.strip() for r in replies)
    assert all(r.prompt_tokens > 0 and 0 < r.completion_tokens <= 20 for r in replies)
    assert replies[2].prompt_tokens > replies[1].prompt_tokens
    # Left padding must not change a greedy reply: the same conversation alone gives the same text.
    alone = plain.generate([conversations[1]], GenerationParams(temperature=0.0, max_new_tokens=20))[0]
    assert alone.text[:20] == replies[1].text[:20]


def test_chat_template_is_the_models(plain, conversations):
    from narrative_eval.backends.transformers_backend import render_chat

    prompt = render_chat(plain.tokenizer, conversations[0])
    assert isinstance(prompt, str)
    assert conversations[0][0].content in prompt and conversations[0][1].content in prompt
    assert prompt.rstrip().endswith("assistant")  # SmolLM2's template opens the assistant turn


def test_length_finish_and_stop_strings(plain, conversations):
    cut = plain.generate(conversations[:1], GenerationParams(temperature=0.0, max_new_tokens=4))[0]
    assert cut.finish_reason == "length" and cut.completion_tokens == 4
    full = plain.generate(conversations[:1], GenerationParams(temperature=0.0, max_new_tokens=30))[0]
    word = full.text.split()[2]
    stopped = plain.generate(conversations[:1], GenerationParams(temperature=0.0, max_new_tokens=30, stop=(word,)))[0]
    assert word not in stopped.text and full.text.startswith(stopped.text) and stopped.finish_reason == "stop"


def test_seed_reproducible_at_positive_temperature(plain, conversations):
    def sample(seed: int) -> list[str]:
        return [r.text for r in plain.generate(conversations[:2], GenerationParams(temperature=1.0, max_new_tokens=12, seed=seed))]

    first = sample(4)
    assert sample(4) == first
    assert sample(5) != first


def test_context_overflow_is_a_length_error(plain):
    long_prompt = [Message(role="user", content="word " * 9000)]
    reply = plain.generate([long_prompt], GenerationParams(max_new_tokens=8))[0]
    assert reply.finish_reason == "length" and reply.error


def test_stream_matches_greedy(plain, conversations):
    params = GenerationParams(temperature=0.0, max_new_tokens=16)
    pieces = list(plain.stream(conversations[1], params))
    assert "".join(pieces).strip() == plain.generate([conversations[1]], params)[0].text.strip()


def test_identity_is_the_gguf_digest(plain, smollm_path):
    from narrative_eval.backends.llama_cpp import LlamaCppBackend

    llama = LlamaCppBackend(ModelSpec(id="smollm2", weights=SMOLLM, options={"n_ctx": 128}))
    assert plain.identity() == llama.identity()
    llama.close()


def test_weights_that_do_not_load_whole_are_an_error_naming_model_and_path(smollm_path, tmp_path):
    """A GGUF file cut short, and a checkpoint of another kind of model (an encoder given as a causal LM: its head
    would be random), are errors before any text is generated, not a model that makes noise."""
    import shutil

    from narrative_eval.backends.transformers_backend import TransformersBackend
    from narrative_eval.errors import ModelLoadError
    from narrative_eval.weights import resolve_weights

    cut = tmp_path / "t5-models" / "cut.gguf"
    cut.parent.mkdir()
    data = open(smollm_path, "rb").read()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match=rf"model 'smollm2-bf16' at {cut}: the weights cannot be read"):
        TransformersBackend(spec(weights=str(cut)))
    encoder = shutil.copytree(resolve_weights("embedded:all-minilm-l6-v2"), tmp_path / "minilm")
    with pytest.raises(ModelLoadError, match=rf"model 'smollm2-bf16' at {encoder} did not load whole, so no number is "
                                             r"computed with it: 6 weight\(s\) missing from the checkpoint"):
        TransformersBackend(spec(weights=str(encoder)))
