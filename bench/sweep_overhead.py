"""Sweep overhead: wall time of a whole sweep cell (prompting, cache, extraction, metrics, MLflow
logging, report) against a bare llama-cpp loop generating the same prompts.

One-off costs that a second sweep does not pay are taken before either clock starts and printed on
their own: loading the model and the metric models, and creating the MLflow store (its schema
migrations run once per store). The bare loop is what a researcher would write: one Llama object,
create_chat_completion per prompt, llama.cpp's own prefix reuse.

Target: ratio <= 1.10 on 2 CPU cores.  Usage: python bench/sweep_overhead.py [--limit 40]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import REPO, isolated_stores, write_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    root = isolated_stores("bench-overhead-")

    from llama_cpp import Llama

    from narrative_eval.config import load_config
    from narrative_eval.embedded import embedded_path
    from narrative_eval.metrics import score_all
    from narrative_eval.records import MetricsSpec
    from narrative_eval.studies.infilling import request_seed, select_instances
    from narrative_eval.prompts import render_infilling
    from narrative_eval.sweep import expand_grid, run_sweep

    config = load_config(write_config(root, "overhead", limit=args.limit, max_new_tokens=args.max_new_tokens),
                         catalog=REPO / "experiments/configs/models.yaml")
    cell = expand_grid(config)[0]
    instances = select_instances(cell)
    messages = [[m.model_dump() for m in render_infilling("L2", inst)] for inst in instances]

    # Warm both paths once (model load, metric models, MLflow store) so neither pays a one-off cost the other skips.
    from narrative_eval import tracking

    start = time.perf_counter()
    tracking.client().search_experiments()
    store_setup = time.perf_counter() - start
    start = time.perf_counter()
    score_all(["Warm the metric models up with a sentence."], ["A sentence warms the metric models up."], MetricsSpec())
    metrics_setup = time.perf_counter() - start
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        llm = Llama(model_path=str(embedded_path("smollm2-135m-instruct")), n_ctx=4096, n_threads=os.cpu_count(), verbose=False)
    start = time.perf_counter()
    for inst, conversation in zip(instances, messages):
        llm.create_chat_completion(messages=conversation, temperature=0.0, max_tokens=args.max_new_tokens,
                                   seed=request_seed(0, inst.instance_id))
    bare = time.perf_counter() - start
    llm.close()

    from narrative_eval.backends import get_backend

    get_backend(cell.model)  # loaded before timing, like the bare model
    start = time.perf_counter()
    outcome = run_sweep(config)
    sweep = time.perf_counter() - start
    assert outcome.count("finished") == 1, outcome.cells
    print(f"instances: {len(instances)}, max_new_tokens: {args.max_new_tokens}, cores: {os.cpu_count()}")
    print(f"one-off, before timing: MLflow store creation {store_setup:.2f} s, metric models {metrics_setup:.2f} s")
    print(f"bare llama-cpp loop: {bare:.2f} s")
    print(f"sweep (generation + extraction + 5 metrics + MLflow + report): {sweep:.2f} s")
    print(f"ratio sweep / bare: {sweep / bare:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
