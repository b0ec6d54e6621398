"""Seconds per judgment of a greedy llama.cpp judge under a rubric's JSON schema: the backend's grammar-checked greedy
sampling against llama-cpp-python's own sampler (the grammar applied to the whole vocabulary at every step).

    python bench/judge_sampling.py [--max-new-tokens 200] [--instances 3]

Both embedded models, one thread, the infilling rubric's prompt and answer schema on the gold fills of the first
shipped instances (data/infilling/sample.jsonl), as a sweep's judge sends them, each prompt read whole by both.
Prints, per model, each sampler's seconds (prompt reading included) and replied tokens, the steps where the grammar
refused greedy's first choice, and whether the two gave the same replies (they must).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

from narrative_eval.backends.llama_cpp import GrammarCheckedGreedy, LlamaCppBackend
from narrative_eval.data.instances import load_instances
from narrative_eval.judges.render import render_item
from narrative_eval.judges.rubric import answer_schema, load_rubric
from narrative_eval.records import GenerationParams, ModelSpec
from narrative_eval.studies.infilling.vocabulary import RUBRIC
from narrative_eval.weights import resolve_weights

MODELS = ("smollm2-135m-instruct", "gemma3-270m")
DATA = Path(__file__).resolve().parents[1] / "data" / "infilling" / "sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--instances", type=int, default=3)
    args = parser.parse_args()
    from llama_cpp import Llama

    rubric = load_rubric(RUBRIC)
    schema = answer_schema(rubric, [])
    asks = [render_item(rubric, {"problem": i.problem, "candidate": i.gold_answer})
            for i in load_instances(DATA)[: args.instances]]
    params = GenerationParams(temperature=0.0, max_new_tokens=args.max_new_tokens, json_schema=schema)
    print(f"# {len(asks)} judgments per model, greedy, max_new_tokens={args.max_new_tokens}, 1 CPU thread")
    print(f"{'model':24s} {'sampler':18s} {'seconds':>8s} {'tokens':>7s} {'s/judgment':>11s} {'refused':>8s}")
    for model in MODELS:
        spec = ModelSpec(id=model, weights=f"embedded:{model}", options={"n_ctx": 2048, "n_threads": 1})
        backend = LlamaCppBackend(spec)
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            stock = Llama(model_path=resolve_weights(spec.weights), n_ctx=2048, n_threads=1, n_threads_batch=1,
                          chat_format=backend.llm.chat_format, verbose=False)
        texts: dict[str, list[str]] = {"llama-cpp-python": [], "grammar-checked": []}
        try:
            for name in texts:
                seconds, tokens, refused = 0.0, 0, 0
                for ask in asks:
                    # Both read the whole prompt each time, so the timings differ by the sampling alone.
                    backend.llm.reset()
                    stock.reset()
                    start = time.perf_counter()
                    if name == "grammar-checked":
                        [reply] = backend.generate([ask], params)
                        text, used = reply.text, reply.completion_tokens
                        assert isinstance(backend.llm._sampler, GrammarCheckedGreedy)
                        refused += backend.llm._sampler.refused
                    else:
                        out = stock.create_chat_completion(messages=[m.model_dump() for m in ask],
                                                           **backend._kwargs(params))
                        text, used = out["choices"][0]["message"]["content"], out["usage"]["completion_tokens"]
                    seconds += time.perf_counter() - start
                    tokens += used
                    texts[name].append(text)
                shown = str(refused) if name == "grammar-checked" else "-"
                print(f"{model:24s} {name:18s} {seconds:8.2f} {tokens:7d} {seconds / len(asks):11.2f} "
                      f"{shown:>8s}", flush=True)
        finally:
            backend.close()
            stock.close()
        same = texts["llama-cpp-python"] == texts["grammar-checked"]
        print(f"{model:24s} same replies: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
