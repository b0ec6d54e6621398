"""Probability-weighted judge scores (`scoring: expected`, G-Eval): read from the token log-probabilities of the
judge's reply at each score's position, on the embedded llama.cpp judge and through the OpenAI protocol (the local
test server with the same model), kept and replayed by the request cache."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from narrative_eval.backends.cache import CachedBackend, RequestCache
from narrative_eval.judges import judge_many, load_rubric
from narrative_eval.judges.judge import judge_params
from narrative_eval.judges.validate import expected_scores
from narrative_eval.records import GenerationParams, JudgeSpec, ModelSpec, Reply, TokenLogprob, stable_hash
from narrative_eval.studies.infilling.vocabulary import RUBRIC

from .conftest import CANDIDATE, PROBLEM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))

ITEMS = [{"problem": PROBLEM, "candidate": CANDIDATE},
         {"problem": PROBLEM, "candidate": "The the the the the."}]


def test_the_defaults_leave_spec_hashes_and_request_keys_as_they_were():
    """A judge that samples, a request without log-probabilities and a reply without them dump exactly what they did
    before these fields existed: finished cells stay finished and cached replies stay found."""
    model = ModelSpec(id="m", weights="w")
    expected = JudgeSpec(id="j", model=model, scoring="expected").model_dump(mode="json")
    assert JudgeSpec(id="j", model=model).digest() == stable_hash({k: v for k, v in expected.items() if k != "scoring"})
    asked = GenerationParams(seed=1, top_logprobs=5).model_dump(mode="json")
    assert GenerationParams(seed=1).digest() == stable_hash({k: v for k, v in asked.items() if k != "top_logprobs"})
    assert "logprobs" not in Reply(text="x").model_dump()


def tokens(*pieces: tuple[str, dict[str, float]]) -> list[TokenLogprob]:
    return [TokenLogprob(token=text, logprob=top.get(text, 0.0), top=top) for text, top in pieces]


def test_the_expected_score_weighs_the_allowed_score_tokens_renormalised():
    rubric = load_rubric(RUBRIC)
    keys = rubric.keys
    # Score 2 and 4 equally likely, a non-score token (',') taking the rest of the mass: renormalised, 3.0.
    half = math.log(0.4)
    reply = [("{", {"{": 0.0})]
    for index, key in enumerate(keys):
        reply += [(f'"{key}": ', {f'"{key}": ': 0.0}), ("2", {"2": half, "4": half, ",": math.log(0.2)}),
                  (", " if index < len(keys) - 1 else "}", {})]
    found = expected_scores(rubric, tokens(*reply))
    assert found == {key: pytest.approx(3.0) for key in keys}


def test_a_score_token_with_its_space_is_read_with_the_alternatives_shaped_alike():
    rubric = load_rubric(RUBRIC)
    key = rubric.keys[0]
    reply = tokens((f'{{"{key}":', {}), (" 5", {" 5": math.log(0.5), " 1": math.log(0.25), "1": math.log(0.25)}), ("}", {}))
    found = expected_scores(rubric, reply)
    # '1' without the space would spell `"key":1` after the token before; only ' 1' and ' 5' share the shape.
    assert found[key] == pytest.approx((5 * 0.5 + 1 * 0.25) / 0.75)
    assert all(found[other] is None for other in rubric.keys[1:])  # the reply names no score for them


def expected_judge(model: ModelSpec) -> JudgeSpec:
    return JudgeSpec(id=f"{model.id}-expected", model=model, temperature=0.0, seed=0, max_retries=0, max_new_tokens=256,
                     scoring="expected")


def check_expected(results, sampled) -> None:
    rubric = load_rubric(RUBRIC)
    for result, plain in zip(results, sampled, strict=True):
        assert result.ok, result.error
        assert result.scores == plain.scores  # the same greedy reply: logprobs change nothing sampled
        assert set(result.expected_scores) == set(rubric.keys)
        for key, value in result.expected_scores.items():
            assert value is not None and min(rubric.scale) <= value <= max(rubric.scale), (key, value)
        assert not plain.expected_scores


def test_the_embedded_judge_reads_expected_scores_and_the_cache_replays_them(smollm2_backend, tmp_path):
    judge = expected_judge(smollm2_backend.spec)
    assert judge_params(judge, None, 0).top_logprobs > 0
    cached = CachedBackend(smollm2_backend, RequestCache(tmp_path / "requests.sqlite"))
    results = judge_many(cached, judge, RUBRIC, ITEMS)
    sampled = judge_many(cached, judge.model_copy(update={"scoring": "sampled"}), RUBRIC, ITEMS)
    check_expected(results, sampled)
    # Asking for log-probabilities is another request: the sampled judge generated its own replies.
    assert cached.generated == 2 * len(ITEMS) and cached.hits == 0
    # The expected scores are not the sampled digits (the embedded judge is unsure), and the cache gives them back.
    assert any(result.expected_scores != result.scores for result in results)
    again = judge_many(cached, judge, RUBRIC, ITEMS)
    assert cached.hits == len(ITEMS)
    assert [r.expected_scores for r in again] == [r.expected_scores for r in results]


@pytest.fixture(scope="module")
def protocol_server():
    pytest.importorskip("openai")
    from api_server import ApiServer

    from narrative_eval.weights import resolve_weights

    with ApiServer(resolve_weights("embedded:smollm2-135m-instruct")) as server:
        yield server


def test_expected_scores_through_the_openai_protocol(protocol_server):
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    model = ModelSpec(id="served", backend="openai_compatible", weights="smollm2",
                      options={"base_url": protocol_server.openai_base_url})
    judge = expected_judge(model)
    backend = OpenAICompatibleBackend(model)
    served = judge_many(backend, judge, RUBRIC, ITEMS)
    body = protocol_server.requests()[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == judge_params(judge, None, 0).top_logprobs
    sampled = judge_many(backend, judge.model_copy(update={"scoring": "sampled"}), RUBRIC, ITEMS)
    assert "logprobs" not in protocol_server.requests()[-1].body
    check_expected(served, sampled)


def test_a_judge_asking_expected_scores_of_a_backend_that_cannot_is_a_config_error():
    from narrative_eval.config import load_config
    from narrative_eval.errors import UserError

    quickstart = Path(__file__).resolve().parents[2] / "experiments" / "configs" / "quickstart.yaml"
    claude = "{id: claude, model: {id: claude, backend: anthropic, weights: claude-x}, scoring: expected}"
    with pytest.raises(UserError, match="judge 'claude' asks for scoring: expected, but the anthropic backend cannot"):
        load_config(quickstart, [f"judges=[{claude}]"])
    served = "{id: served, model: {id: served, backend: openai_compatible, weights: m}, scoring: expected}"
    assert load_config(quickstart, [f"judges=[{served}]"]).judges[0].scoring == "expected"
