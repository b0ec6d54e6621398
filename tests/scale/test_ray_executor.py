"""`--executor ray` on a local 2-CPU Ray cluster gives what `--executor local` gives.

One cluster serves the module: the sweep command and the in-process sweep join it by address, as a sweep joins
a real cluster (`executor_options.address`), instead of each starting a Ray instance of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys

import mlflow
import pandas as pd
import pytest

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.sweep import run_sweep
from tests.servers import start_ray_head

pytestmark = [pytest.mark.server, pytest.mark.slow]
pytest.importorskip("ray", reason="the ray extra is not installed")

CELL_KEY = ["params.model_id", "params.prompt_setting", "params.condition"]


def timing_metric(name: str) -> bool:
    """Wall-clock metrics depend on the machine's load, and cost counters (requests sent, dollars paid) on
    what the request cache already held; neither is one of the executor's results."""
    return "seconds" in name or name.endswith("per_s") or name.startswith("metrics.cost/")


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """`ray start --head --block` with 2 CPUs on 127.0.0.1 in its own process group; yields its address.

    Ray gives its raylet a fixed 30 s to register at start; on a machine busy with engines starting (the suite's
    other workers) it missed that once, so a head that exits during its start is tried again, up to three times."""
    for attempt in range(1, 4):
        try:
            process, address = start_ray_head(tmp_path_factory.mktemp("ray"), cpus=2)
            break
        except RuntimeError as failure:
            if attempt == 3:
                pytest.fail(f"3 tries: {failure}")
    yield address
    os.killpg(process.pid, signal.SIGTERM)  # --block stops the head's processes when it is stopped
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def tiny_sweep_file(tmp_path_factory, repo_root, ray_head):
    root = tmp_path_factory.mktemp("ray-sweep")
    path = root / "tiny.yaml"
    # The sweep command resolves model names from the models.yaml next to the config.
    shutil.copy(repo_root / "experiments/configs/models.yaml", root / "models.yaml")
    report_dir = f"{root}/report-{{sweep}}"
    # Its own request cache, so the first run generates for certain and the second can only read it.
    path.write_text(
        f"""
study: infilling
sweep: unset
data: {repo_root / 'data/infilling/sample.jsonl'}
limit: 2
models: [smollm2]
prompt_settings: [L1, L2]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: 32}}
cache: {root / 'requests.sqlite'}
report_dir: {report_dir}
executor_options: {{address: "{ray_head}", num_cpus: 1, max_retries: 1}}
"""
    )
    return path, root.name


def run_cli(path, sweep: str, executor: str, repo_root) -> None:
    """The sweep command as a user types it; the tracking store and artifact root come from the environment."""
    command = [sys.executable, "-m", "experiments.sweep", "--config", str(path), "--set", f"sweep={sweep}",
               "--executor", executor, "--no-progress"]
    done = subprocess.run(command, cwd=repo_root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{executor} sweep failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"


@pytest.fixture(scope="module")
def both_runs(tiny_sweep_file, repo_root):
    path, suffix = tiny_sweep_file
    ray_sweep, local_sweep = f"ray-{suffix}", f"local-{suffix}"
    # Ray first: its workers fill the shared cache, so the local run sending nothing proves they wrote to it.
    run_cli(path, ray_sweep, "ray", repo_root)
    run_cli(path, local_sweep, "local", repo_root)
    return tracking.sweep_cell_runs("infilling", ray_sweep), tracking.sweep_cell_runs("infilling", local_sweep)


def test_same_child_runs_under_each_parent(both_runs):
    ray_runs, local_runs = both_runs
    assert len(ray_runs) == len(local_runs) == 2
    for runs in (ray_runs, local_runs):
        assert runs["tags.mlflow.parentRunId"].nunique() == 1
        assert set(runs["status"]) == {"FINISHED"}
    assert sorted(map(tuple, ray_runs[CELL_KEY].values)) == sorted(map(tuple, local_runs[CELL_KEY].values))


def test_same_metrics_exactly(both_runs):
    ray_runs, local_runs = both_runs
    metric_columns = [c for c in ray_runs.columns if c.startswith("metrics.") and not timing_metric(c)]
    assert {"metrics.rouge1", "metrics.at_avg", "metrics.bertscore", "metrics.extraction_success_rate"} <= set(metric_columns)
    assert set(metric_columns) == {c for c in local_runs.columns if c.startswith("metrics.") and not timing_metric(c)}
    ray_by_cell = ray_runs.set_index(CELL_KEY)[metric_columns].sort_index()
    local_by_cell = local_runs.set_index(CELL_KEY)[metric_columns].sort_index()
    # Text-overlap metrics match exactly. The embedding metrics (BERTScore, Sem-F1, so AtAvg) are float32 sums
    # whose last bits follow the worker's torch thread count (Ray gives a cell 1 CPU), so they match to 1e-6.
    pd.testing.assert_frame_equal(ray_by_cell, local_by_cell, check_exact=False, rtol=0, atol=1e-6)
    exact = [c for c in metric_columns if not any(m in c for m in ("bertscore", "semf1", "at_avg"))]
    assert ray_by_cell[exact].equals(local_by_cell[exact])


def test_ray_workers_generated_and_local_run_reused_their_cache(both_runs):
    ray_runs, local_runs = both_runs
    assert all(int(g) > 0 for g in ray_runs["tags.narrative_eval.generated"])
    assert all(int(g) == 0 for g in local_runs["tags.narrative_eval.generated"])


def test_generations_tables_match(both_runs):
    ray_runs, local_runs = both_runs
    for setting in ("L1", "L2"):
        ray_id = ray_runs.loc[ray_runs["params.prompt_setting"] == setting, "run_id"].iloc[0]
        local_id = local_runs.loc[local_runs["params.prompt_setting"] == setting, "run_id"].iloc[0]
        columns = ["instance_id", "seed", "messages", "raw_reply", "answer", "extraction_status", "rouge1"]
        ray_table, local_table = tracking.load_table(ray_id, "generations.json"), tracking.load_table(local_id, "generations.json")
        assert ray_table[columns].equals(local_table[columns])
        # The driver's cell writer logged the workers' cells as the local executor does: one trace per generation.
        experiment_id = ray_runs["experiment_id"].iloc[0]
        traces = mlflow.search_traces(locations=[experiment_id], run_id=ray_id, return_type="list", include_spans=False)
        assert len(traces) == len(ray_table)
        assert sorted(t.info.trace_id for t in traces) == sorted(ray_table["trace_id"])
        pd.testing.assert_series_equal(ray_table["bertscore"], local_table["bertscore"], check_exact=False, rtol=0, atol=1e-6)


def test_failing_cell_is_retried_then_recorded_without_stopping_the_others(tiny_sweep_file, both_runs, repo_root, caplog):
    path, suffix = tiny_sweep_file
    config = load_config(
        path,
        [f"sweep=retry-{suffix}", "prompt_settings=[L1]",
         "models=[smollm2, {id: missing-weights, backend: llama_cpp, weights: /nonexistent/missing.gguf}]",
         "metrics.names=[rouge1]"],  # retries are tested here, the metrics on Ray above: the cheapest one
        catalog=repo_root / "experiments/configs/models.yaml",
    )
    with caplog.at_level(logging.WARNING, logger="narrative_eval.executors.ray"):
        outcome = run_sweep(config, executor="ray", write_report=False)
    by_model = {o.cell.model.id: o for o in outcome.cells}
    assert by_model["smollm2"].status == "finished"
    assert by_model["missing-weights"].status == "failed" and by_model["missing-weights"].error
    retries = [r for r in caplog.records if "missing-weights" in r.getMessage() and "retrying" in r.getMessage()]
    assert len(retries) == config.executor_options["max_retries"]
    # One MLflow run per cell however many attempts it took: retries resume the same run.
    runs = tracking.sweep_cell_runs("infilling", config.sweep, finished_only=False)
    assert sorted(runs["status"]) == ["FAILED", "FINISHED"]
    failed = runs[runs["status"] == "FAILED"].iloc[0]
    assert failed["tags.narrative_eval.model"] == "missing-weights" and failed["tags.narrative_eval.error"]
