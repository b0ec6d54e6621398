"""A new SQLite tracking store under concurrent first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import PATIENCE_S

REPO = Path(__file__).resolve().parents[1]
# Each process imports everything first, says "ready", then waits for the go file: their first
# connections to the store then start within milliseconds of each other.
FIRST_USE = """
import os, sys, time
from narrative_eval import tracking
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
tracking.experiment_id("infilling")
tracking.client().search_runs([tracking.experiment_id("infilling")])
print("ok", flush=True)
"""
STARTS = 4
ROUNDS = 1


def test_concurrent_first_use_of_a_new_store_does_not_crash(tmp_path):
    """Four processes opening one new sqlite store at the same moment all succeed (MLflow's migration ran once)."""
    failures = []
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        go = folder / "go"
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}"}
        processes = [subprocess.Popen([sys.executable, "-c", FIRST_USE, str(go)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(STARTS)]
        for process in processes:
            assert process.stdout.readline().strip() == "ready"
        go.touch()
        for process in processes:
            out, err = process.communicate(timeout=PATIENCE_S)
            if process.returncode != 0 or "ok" not in out:
                errors = [line for line in err.splitlines() if "Error" in line or "duplicate" in line]
                failures.append(errors[-1] if errors else f"exit {process.returncode}")
    assert not failures, failures
