"""Prices of hosted models, and the dry run's cost estimate built on them."""

from __future__ import annotations

import pytest

from narrative_eval.backends.accounting import Prices
from narrative_eval.config import load_config
from narrative_eval.records import ModelSpec
from narrative_eval.sweep import PROMPT_TOKENS_ESTIMATE, describe_grid


def test_dollars_from_the_price_table():
    prices = Prices.of(ModelSpec(id="priced", backend="openai", weights="m", options={"prices": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}))
    assert prices.dollars(1_000_000, 0) == 2.0
    assert prices.dollars(250_000, 500_000) == pytest.approx(0.5 + 4.0)


def test_no_price_table_means_no_prices_and_bad_fields_are_refused():
    assert Prices.of(ModelSpec(id="local", weights="w")) is None
    with pytest.raises(ValueError, match="per_token"):
        Prices.of(ModelSpec(id="bad", weights="w", options={"prices": {"per_token": 1}}))


def test_dry_run_prices_generations_and_judge_calls(repo_root):
    priced = "{id: api, backend: openai, weights: gpt-x, options: {prices: {input_per_mtok: 1.0, output_per_mtok: 10.0}}}"
    config = load_config(repo_root / "experiments/configs/quickstart.yaml",
                         [f"models=[{priced}, smollm2]", "limit=4", "seeds=[0,1]", "prompt_settings=[L2]",
                          "judge_checks=false"])  # the control calls are counted in tests/test_sweep_judge_checks.py
    grid = describe_grid(config)
    assert grid["generations"] == 2 * 4 * 2 and grid["judge_calls"] == 2 * 4 * 2
    # Only the priced generator costs anything (the judge and smollm2 run locally): 8 requests at the token limit.
    requests, max_new = 4 * 2, config.generation.max_new_tokens
    assert grid["estimated_cost_usd"] == pytest.approx(requests * (PROMPT_TOKENS_ESTIMATE * 1.0 + max_new * 10.0) / 1e6)
