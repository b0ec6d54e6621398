"""Sweep overhead: wall time of a whole sweep cell (prompting, cache, extraction, metrics, MLflow
logging with one trace per generation, report) against a bare llama-cpp loop generating the same prompts.

One-off costs that a second sweep does not pay are taken before either clock starts and printed on
their own: loading the model and the metric models, and creating the MLflow store (its schema
migrations run once per store). The bare loop is what a researcher would write: one Llama object with
its defaults, create_chat_completion per prompt, llama.cpp's own prefix reuse.

Wall time on a shared 2-core machine varies by about 10% from one run of the same loop to the next,
as much as the effect measured, so one pair of runs proves nothing. The bare loop and the sweep run
in turn, `--repeats` times (each sweep with a fresh request cache, so it generates everything), and
the ratio is taken between the medians. A last sweep over a warm request cache times everything but
generation, which shows the overhead directly.

Target: ratio <= 1.10 on 2 CPU cores.  Usage: python bench/sweep_overhead.py [--limit 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import REPO, isolated_stores, write_config  # noqa: E402

CATALOG = REPO / "experiments/configs/models.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = isolated_stores("bench-overhead-")

    from llama_cpp import Llama

    from narrative_eval import tracking
    from narrative_eval.backends import get_backend
    from narrative_eval.config import load_config
    from narrative_eval.metrics import score_all
    from narrative_eval.studies.infilling.prompts import render_infilling
    from narrative_eval.records import MetricsSpec
    from narrative_eval.records import derived_seed
    from narrative_eval.studies.infilling import select_instances
    from narrative_eval.sweep import expand_grid, run_sweep
    from narrative_eval.weights import embedded_path

    def config(name: str):
        path = write_config(root, name, limit=args.limit, max_new_tokens=args.max_new_tokens)
        return load_config(path, catalog=CATALOG)

    cell = expand_grid(config("overhead-0"))[0]
    instances = select_instances(cell)
    messages = [[m.model_dump() for m in render_infilling(cell.prompt_setting, inst)] for inst in instances]

    # One-off costs, paid before either clock starts.
    start = time.perf_counter()
    tracking.client().search_experiments()
    store_setup = time.perf_counter() - start
    start = time.perf_counter()
    score_all(["Warm the metric models up with a sentence."], ["A sentence warms the metric models up."], MetricsSpec())
    metrics_setup = time.perf_counter() - start
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        llm = Llama(model_path=str(embedded_path("smollm2-135m-instruct")), n_ctx=4096, n_threads=os.cpu_count(), verbose=False)
    get_backend(cell.model)

    def bare_loop() -> float:
        start = time.perf_counter()
        for inst, conversation in zip(instances, messages):
            llm.create_chat_completion(messages=conversation, temperature=0.0, max_tokens=args.max_new_tokens,
                                       seed=derived_seed(0, inst.instance_id))
        return time.perf_counter() - start

    def sweep(name: str, cache: str) -> tuple[float, int]:
        os.environ["NARRATIVE_EVAL_CACHE"] = str(root / cache)
        start = time.perf_counter()
        outcome = run_sweep(config(name))
        seconds = time.perf_counter() - start
        assert outcome.count("finished") == 1, outcome.cells
        return seconds, outcome.generated

    print(f"instances: {len(instances)}, max_new_tokens: {args.max_new_tokens}, cores: {os.cpu_count()}")
    print(f"one-off, before timing: MLflow store creation {store_setup:.2f} s, metric models {metrics_setup:.2f} s")
    bare_times, sweep_times = [], []
    for repeat in range(args.repeats):
        bare_times.append(bare_loop())
        seconds, generated = sweep(f"overhead-{repeat}", f"requests-{repeat}.sqlite")
        sweep_times.append(seconds)
        print(f"repeat {repeat}: bare {bare_times[-1]:.2f} s, sweep {seconds:.2f} s ({generated} generated), "
              f"ratio {seconds / bare_times[-1]:.3f}", flush=True)
    llm.close()
    # Same requests again in a new sweep: every reply comes from the cache, so this is the sweep's own work;
    # once with MLflow traces (one per generation, with its assessments) and once without.
    warm, generated = sweep("overhead-warm-cache", f"requests-{args.repeats - 1}.sqlite")
    assert generated == 0, generated
    os.environ["NARRATIVE_EVAL_TRACES"] = "0"
    warm_untraced, _ = sweep("overhead-warm-cache-no-traces", f"requests-{args.repeats - 1}.sqlite")
    os.environ.pop("NARRATIVE_EVAL_TRACES")

    bare, swept = statistics.median(bare_times), statistics.median(sweep_times)
    print(f"bare llama-cpp loop, median of {args.repeats}: {bare:.2f} s (range {min(bare_times):.2f}-{max(bare_times):.2f})")
    print(f"sweep (generation + extraction + 5 metrics + MLflow + report), median: {swept:.2f} s "
          f"(range {min(sweep_times):.2f}-{max(sweep_times):.2f})")
    print(f"sweep without generation (warm request cache): {warm:.2f} s = {warm / bare:.3f} of the bare loop "
          f"with traces, {warm_untraced:.2f} s = {warm_untraced / bare:.3f} without (NARRATIVE_EVAL_TRACES=0); "
          f"traces cost {1000 * (warm - warm_untraced) / len(instances):.0f} ms per generation")
    print(f"ratio sweep / bare, medians: {swept / bare:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
