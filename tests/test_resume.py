"""A sweep killed with SIGKILL mid-way and rerun ends exactly like an uninterrupted one, generating
only the requests that were not finished before the kill."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from narrative_eval import tracking

pytestmark = pytest.mark.slow

# Three settings: the kill lands after the first cell, so the rerun meets a finished, a cut and an unstarted cell.
INSTANCES, SETTINGS = 4, ["L0", "L1", "L2"]
TOTAL_REQUESTS = INSTANCES * len(SETTINGS)


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
generation: {{temperature: 0.7, max_new_tokens: 32}}
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
