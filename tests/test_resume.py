"""A sweep killed with SIGKILL mid-way and rerun ends exactly like an uninterrupted one, generating
only the requests that were not finished before the kill; killed at three random moments against an instant
server, it still ends with exactly one trace per generation, each with all its assessments."""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from experiments.progress import PROGRESS_ENV
from narrative_eval import tracking

BACKENDS = Path(__file__).parent / "backends"

# Three settings: the kill lands after the first cell, so the rerun meets a finished, a cut and an unstarted cell.
INSTANCES, SETTINGS = 4, ["L0", "L1", "L2"]
TOTAL_REQUESTS = INSTANCES * len(SETTINGS)
# Replies of a few words: what is compared is where the rerun resumes and that it ends as the uninterrupted run did,
# not the replies' length (each run decodes every token on one core; 32 tokens cost three times as much).
NEW_TOKENS = 10


def _config(root: Path, repo: Path) -> Path:
    path = root / "resume.yaml"
    path.write_text(
        f"""
study: infilling
sweep: resume
data: {repo / 'data/infilling/sample.jsonl'}
limit: {INSTANCES}
models: [smollm2]
prompt_settings: [{', '.join(SETTINGS)}]
seeds: [3]
generation: {{temperature: 0.7, max_new_tokens: {NEW_TOKENS}}}
report_dir: {root / 'report'}
# Two cheap metrics: what is compared is resumption, not the metric libraries (tests/metrics).
metrics: {{names: [rouge1, chrf]}}
"""
    )
    return path


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}",
        NARRATIVE_EVAL_ARTIFACT_ROOT=str(root / "artifacts"),
        NARRATIVE_EVAL_CACHE=str(root / "requests.sqlite"),
    )
    return env


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "experiments.sweep", "--config", str(config), "--no-progress"]


def _cached(root: Path) -> int:
    path = root / "requests.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _finished_metrics(root: Path, monkeypatch) -> dict[str, dict[str, float]]:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
    runs = tracking.sweep_cell_runs("infilling", "resume", finished_only=False)
    assert set(runs["status"]) == {"FINISHED"}
    return {
        # Not compared: wall time, and cost counters (what this invocation sent and paid; a rerun pays for
        # nothing the killed attempt already obtained).
        run["params.prompt_setting"]: {k: run[k] for k in run.index if k.startswith("metrics.")
                                       and not k.endswith("seconds") and not k.startswith("metrics.cost/")}
        for _, run in runs.iterrows()
    }


@pytest.mark.slow
def test_sigkill_then_rerun_matches_uninterrupted(tmp_path, repo_root, monkeypatch):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    for root in (straight, killed):
        root.mkdir()
        _config(root, repo_root)
        # Model names resolve from the catalog beside the config file.
        (root / "models.yaml").write_text((repo_root / "experiments/configs/models.yaml").read_text())

    done = subprocess.run(_command(straight / "resume.yaml"), cwd=repo_root, env=_env(straight),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    process = subprocess.Popen(_command(killed / "resume.yaml"), cwd=repo_root, env=_env(killed),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while _cached(killed) < INSTANCES and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before_rerun = _cached(killed)
    assert 0 < before_rerun < TOTAL_REQUESTS, "the kill must land mid-way"

    rerun = subprocess.run(_command(killed / "resume.yaml"), cwd=repo_root, env=_env(killed),
                           capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    generated = int(re.search(r"requests sent to engines: (\d+)", rerun.stdout).group(1))
    assert generated == TOTAL_REQUESTS - before_rerun

    expected, got = _finished_metrics(straight, monkeypatch), _finished_metrics(killed, monkeypatch)
    assert sorted(got) == sorted(expected) == sorted(SETTINGS)  # one run per cell, no duplicates
    for setting in SETTINGS:
        for key, value in expected[setting].items():
            assert got[setting][key] == pytest.approx(value, abs=1e-9), (setting, key)

    # The evaluation records too: one trace per generation, one assessment per (trace, name, source).
    runs = tracking.sweep_cell_runs("infilling", "resume")
    experiment = tracking.client().get_experiment_by_name("infilling").experiment_id
    for run_id in runs["run_id"]:
        traces = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
        keys = [t.info.tags["narrative_eval.trace_key"] for t in traces]
        assert len(keys) == len(set(keys)) == INSTANCES, run_id
        for trace in traces:
            named = [(a.name, a.source.source_id) for a in trace.info.assessments]
            assert len(named) == len(set(named)) and named, trace.info.trace_id


# The instant server's sweep: cells small enough that a kill lands anywhere in one (generation, the cell writer's
# traces, its FINISHED status, the next cell), the whole thing a few seconds of work after the imports.
KILL_SETTINGS, KILL_INSTANCES, KILLS = ["L0", "L1", "L2"], 40, 3


def _instant_config(root: Path, repo: Path, base_url: str) -> Path:
    path = root / "killed.yaml"
    path.write_text(f"""
study: infilling
sweep: killed
data: {repo / 'data/infilling/benchmark.csv'}
limit: {KILL_INSTANCES}
models: [{{id: instant, backend: openai_compatible, weights: instant, options: {{base_url: '{base_url}', max_concurrency: 4}}}}]
prompt_settings: [{', '.join(KILL_SETTINGS)}]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: 16}}
metrics: {{names: [rouge1]}}
report_dir: {root / 'report'}
""")
    return path


@pytest.mark.server
def test_three_random_sigkills_leave_one_trace_per_generation_with_its_assessments(tmp_path, repo_root, monkeypatch):
    sys.path.insert(0, str(BACKENDS))
    from api_server import start_instant_server

    from tests.servers import stop

    server, base_url = start_instant_server()
    try:
        config, env = _instant_config(tmp_path, repo_root, base_url), _env(tmp_path)
        rng = random.Random()
        seed = rng.randrange(2**32)
        rng.seed(seed)
        moments = []
        for attempt in range(KILLS):
            # The progress file appears when the cells start: the kill moment is drawn from the sweep's own work
            # (generation, the writer's traces and runs' status, the next cell, the report), not from its imports.
            progress = tmp_path / f"progress-{attempt}.json"
            process = subprocess.Popen(_command(config), cwd=repo_root, env={**env, PROGRESS_ENV: str(progress)},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 300
            while not progress.exists() and process.poll() is None and time.time() < deadline:
                time.sleep(0.02)
            moments.append(round(rng.uniform(0.0, 2.0), 2))
            time.sleep(moments[-1])
            process.send_signal(signal.SIGKILL)
            process.wait()
        done = subprocess.run(_command(config), cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        stop(server)

    context = f"random seed {seed}, kills {moments} s after the cells started"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = tracking.sweep_cell_runs("infilling", "killed", finished_only=False)
    assert sorted(runs["params.prompt_setting"]) == sorted(KILL_SETTINGS), context  # one run per cell
    assert set(runs["status"]) == {"FINISHED"}, context
    experiment = tracking.client().get_experiment_by_name("infilling").experiment_id
    every = mlflow.search_traces(locations=[experiment], return_type="list", include_spans=False)
    assert len(every) == KILL_INSTANCES * len(KILL_SETTINGS), context  # nothing left over from a killed attempt
    for run_id in runs["run_id"]:
        found = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list", include_spans=False)
        keys = [t.info.tags["narrative_eval.trace_key"] for t in found]
        assert len(keys) == len(set(keys)) == KILL_INSTANCES, context
        for trace in found:
            named = sorted(a.name for a in trace.info.assessments)
            assert named == ["gold", "rouge1"], (context, trace.info.trace_id, named)
