"""Scale: what the platform itself costs per generation when the engine is instant.

A local OpenAI-compatible server that answers at once (tests/backends/api_server.py without a model, in its own
process) leaves only the client's work to time. The same requests go once through a bare loop (the `openai` SDK,
8 threads, what a researcher would write) and once through a sweep (`run_sweep`: request cache, extraction, ROUGE-1,
MLflow runs, one trace per generation with its assessments, the dataset records, the report), on a published-format
data file of N instances made from the shipped passages. Two sizes:

- `4000`: 2,000 instances x 2 prompt settings (2 cells), the case the issue was filed with;
- `20000`: 334 instances x 5 TELeR levels x 12 models (60 cells, 20,040 generations): does the cost per generation
  grow with the store, and do the steps after generation (the report, the Runs tab's first load) stay linear?

Printed per size: both wall times and their ratio (target <= 1.3), the platform's milliseconds per generation
((sweep - bare) / generations) and the CPU time behind it (the client process's, which the machine's load does not
change as it changes wall time), the store's bytes per generation (the SQLite file and the artifacts folder), the
report's time rebuilt from MLflow (target <= 60 s at 20,000) and the first load of the app's Runs tab (target
<= 3 s) and Compare tab: the library work their callbacks do when the tab opens on the sweep, without a browser;
and the machine's load average before and after (the ratio moves with what else the cores run).
The last line prints every figure.

Usage: python bench/sweep_scale.py [--sizes 4000 20000] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "backends"))

from bench._common import REPO, isolated_stores  # noqa: E402

THREADS = 8
"""Requests in flight: the bare loop's threads and the sweep's max_concurrency."""
MAX_NEW_TOKENS = 64
SIZES = {4000: (2000, ["L0", "L2"], 1), 20000: (334, ["L0", "L1", "L2", "L3", "L4"], 12)}
"""Size -> (instances, prompt settings, models)."""


def scale_instances(count: int) -> list:
    """`count` instances from the shipped passages: every (start, span length) a passage allows, passage by passage;
    past the last passage the passages come again under new ref_ids (`<ref_id>~2`, ...)."""
    from narrative_eval.studies.infilling.builder import load_passages, make_instance
    from narrative_eval.data.instances import sentences

    passages = load_passages(REPO / "data/infilling/passages")
    instances: list = []
    copy = 1
    while len(instances) < count:
        for passage in passages:
            text = sentences(passage.text)
            ref_id = passage.ref_id if copy == 1 else f"{passage.ref_id}~{copy}"
            for n in (1, 2, 3):
                for start in range(len(text) - n + 1 if len(text) > n else 0):
                    instances.append(make_instance(passage.dataset, ref_id, text, start, n))
        copy += 1
    return instances[:count]


def write_config(root: Path, name: str, data: Path, base_url: str, settings: list[str], models: int) -> Path:
    specs = ", ".join(
        f"{{id: instant-{k}, backend: openai_compatible, weights: instant-{k}, "
        f"options: {{base_url: '{base_url}', max_concurrency: {THREADS}, retry_base_delay: 0.05}}}}"
        for k in range(1, models + 1))
    path = root / f"{name}.yaml"
    path.write_text(f"""
study: infilling
sweep: {name}
data: {data}
models: [{specs}]
prompt_settings: [{', '.join(settings)}]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: {MAX_NEW_TOKENS}}}
metrics: {{names: [rouge1]}}
judges: []
report_dir: {root / 'report' / name}
""")
    return path


def bare_loop(base_url: str, cells: list, instances: list) -> tuple[float, float]:
    """The sweep's requests through the `openai` SDK, THREADS at a time; seconds of wall time and of this process's
    CPU time."""
    import openai

    from narrative_eval.studies.infilling.prompts import render_infilling
    from narrative_eval.records import derived_seed

    requests = [(cell.model.weights, [m.model_dump() for m in render_infilling(cell.prompt_setting, inst)],
                 derived_seed(0, inst.instance_id)) for cell in cells for inst in instances]
    client = openai.OpenAI(base_url=base_url, api_key="no-key-needed", max_retries=0)

    def send(request) -> str:
        model, messages, seed = request
        reply = client.chat.completions.create(model=model, messages=messages, temperature=0.0,
                                               max_tokens=MAX_NEW_TOKENS, seed=seed)
        return reply.choices[0].message.content

    start, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(THREADS) as pool:
        replies = list(pool.map(send, requests))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(replies) == len(requests) and all(replies)
    client.close()
    return seconds, cpu


def runs_tab_first_load(sweep: str) -> float:
    """Seconds of the library work the Runs tab's callbacks do when it opens on `sweep` (study, sweep, filters)."""
    from ui import runs
    from ui.common import AppSettings, cell_runs, pick_sweep

    app = AppSettings(mlflow_ui_url="http://127.0.0.1:9")  # no MLflow UI there: plain run ids
    start = time.perf_counter()
    _, chosen = pick_sweep("infilling", sweep)
    listed = cell_runs("infilling", chosen, finished_only=False)
    table, _ = runs.runs_table("infilling", chosen, [], [], [], runs.MEAN, runs.ALL_JUDGES, app)
    runs.csv_file("infilling", chosen, [], [], [], runs.MEAN, runs.ALL_JUDGES)
    charts = runs.chart_choices(listed, "infilling")
    runs.chart(runs.filtered_runs("infilling", chosen, [], [], []), charts[0][1] if charts else None)
    seconds = time.perf_counter() - start
    assert len(table) == len(listed) and not listed.empty
    return seconds


def compare_tab_first_load(sweep: str) -> float:
    """Seconds of the library work the Compare tab's callbacks do when it opens on `sweep`: its runs, the default
    ones' seeds and instance order (their generations tables), the first instance drawn."""
    from ui import compare
    from ui.common import cell_runs, pick_sweep, run_choices, study_named

    study = study_named("infilling")
    start = time.perf_counter()
    _, chosen = pick_sweep("infilling", sweep)
    run_ids = [run_id for _, run_id in run_choices(cell_runs("infilling", chosen))][:compare.MAX_DEFAULT_RUNS]
    seeds = compare.seeds_for(run_ids)
    order = compare.instance_order(study, run_ids, seeds[0], False)
    view = compare.render(study, chosen, run_ids, seeds[0], order[0])
    seconds = time.perf_counter() - start
    assert "empty" not in view[:40], view[:300]
    return seconds


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def measure(size: int, root: Path, base_url: str) -> dict[str, float]:
    from narrative_eval.config import load_config
    from narrative_eval.data.instances import save_instances
    from narrative_eval.studies.infilling.report import write_infilling_report
    from narrative_eval.sweep import expand_grid, run_sweep

    count, settings, models = SIZES[size]
    load_before = os.getloadavg()[0]
    instances = scale_instances(count)
    data = save_instances(instances, root / f"scale-{count}.csv")
    name = f"scale-{size}"
    config = load_config(write_config(root, name, data, base_url, settings, models))
    cells = expand_grid(config)
    bare, bare_cpu = bare_loop(base_url, cells, instances)
    start, cpu = time.perf_counter(), time.process_time()
    outcome = run_sweep(config)
    swept, swept_cpu = time.perf_counter() - start, time.process_time() - cpu
    generations = len(cells) * count
    assert outcome.count("finished") == len(cells) and outcome.generated == generations, outcome.cells
    store = Path(os.environ["MLFLOW_TRACKING_URI"].removeprefix("sqlite:///"))
    start = time.perf_counter()
    write_infilling_report(name, root / "report-again" / name, data_sha256=cells[0].data_sha256)
    report = time.perf_counter() - start
    figures = {
        "generations": generations, "cells": len(cells), "bare_s": bare, "sweep_s": swept, "ratio": swept / bare,
        "ms_per_generation": 1000 * (swept - bare) / generations,
        "cpu_ms_per_generation": 1000 * (swept_cpu - bare_cpu) / generations,
        "store_bytes_per_generation": (store.stat().st_size + folder_bytes(root / "artifacts")) / generations,
        "db_bytes_per_generation": store.stat().st_size / generations,
        "report_s": report, "runs_tab_s": runs_tab_first_load(name), "compare_tab_s": compare_tab_first_load(name),
        "load": (load_before, os.getloadavg()[0]),
    }
    print(f"{size}: {generations} generations in {len(cells)} cells; bare loop {bare:.1f} s, sweep {swept:.1f} s, "
          f"ratio {figures['ratio']:.2f} (target <= 1.3); platform {figures['ms_per_generation']:.2f} ms per "
          f"generation ({figures['cpu_ms_per_generation']:.2f} ms of CPU time: sweep {swept_cpu:.1f} s, bare loop "
          f"{bare_cpu:.1f} s); store {figures['store_bytes_per_generation'] / 1024:.1f} KB per generation "
          f"({figures['db_bytes_per_generation'] / 1024:.1f} KB in the database); report {report:.1f} s; "
          f"Runs tab first load {figures['runs_tab_s']:.2f} s; Compare tab {figures['compare_tab_s']:.2f} s; "
          "load average (1 min) %.1f -> %.1f" % figures["load"], flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=sorted(SIZES), choices=sorted(SIZES))
    parser.add_argument("--keep", action="store_true", help="keep the stores in the temporary folder")
    args = parser.parse_args()

    from api_server import start_instant_server

    from narrative_eval import tracking
    from narrative_eval.quiet import quiet_dependencies
    from tests.servers import stop

    quiet_dependencies()
    server, base_url = start_instant_server()
    results = {}
    try:
        for size in args.sizes:
            root = isolated_stores(f"bench-scale-{size}-")
            tracking.client().search_experiments()  # the store's schema, created before any clock starts
            try:
                results[size] = measure(size, root, base_url)
            finally:
                if not args.keep:
                    shutil.rmtree(root, ignore_errors=True)
    finally:
        stop(server)
    print(f"cores: {os.cpu_count()}; " + "; ".join(
        f"{size}: ratio {r['ratio']:.2f}, {r['ms_per_generation']:.2f} ms/generation "
        f"({r['cpu_ms_per_generation']:.2f} ms CPU), "
        f"{r['store_bytes_per_generation'] / 1024:.1f} KB/generation, report {r['report_s']:.1f} s, "
        f"Runs tab {r['runs_tab_s']:.2f} s, Compare tab {r['compare_tab_s']:.2f} s, load %.1f -> %.1f" % r["load"]
        for size, r in results.items()))


if __name__ == "__main__":
    main()
