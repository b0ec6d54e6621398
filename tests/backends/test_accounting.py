"""Token, time and dollar sums over replies."""

from __future__ import annotations

import pytest

from narrative_eval.backends.accounting import Prices, account
from narrative_eval.records import GenerationParams, ModelSpec, Reply


def test_dollars_from_the_price_table(llama_backend, conversations):
    replies = llama_backend.generate(conversations, GenerationParams(max_new_tokens=12, seed=0))
    replies.append(replies[0].model_copy(update={"cached": True}))
    replies.append(Reply(text="", finish_reason="error", error="HTTP 500"))
    spec = ModelSpec(id="priced", backend="openai", weights="m", options={"prices": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}})
    usage = account(replies, spec)
    fresh = [r for r in replies if not r.cached]
    expected = sum(r.prompt_tokens for r in fresh) * 2.0 / 1e6 + sum(r.completion_tokens for r in fresh) * 8.0 / 1e6
    assert usage.dollars == pytest.approx(expected) and usage.dollars > 0
    assert usage.requests == 5 and usage.cached == 1 and usage.errors == 1
    assert usage.prompt_tokens == sum(r.prompt_tokens for r in replies)
    assert usage.seconds == pytest.approx(sum(r.seconds for r in replies))
    metrics = usage.as_metrics("gen_")
    assert metrics["gen_dollars"] == usage.dollars and metrics["gen_completion_tokens"] == usage.completion_tokens


def test_no_price_table_means_unknown_cost():
    usage = account([Reply(text="x", prompt_tokens=3, completion_tokens=2)], ModelSpec(id="local", weights="w"))
    assert usage.dollars is None and "dollars" not in usage.as_metrics()
    with pytest.raises(ValueError):
        Prices.of(ModelSpec(id="bad", weights="w", options={"prices": {"per_token": 1}}))
