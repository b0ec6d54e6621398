"""Faults a long sweep meets: a damaged request cache, a tracking server that goes away and comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from narrative_eval.backends.cache import RequestCache
from narrative_eval.records import Reply
from tests.servers import free_port, start_mlflow, stop
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


def filled_cache(path: Path, rows: int = 400) -> None:
    """A real cache file spanning many pages (about 200 KB)."""
    cache = RequestCache(path)
    cache.put_many([(f"key-{i}", Reply(text="x" * 400 + str(i))) for i in range(rows)])
    cache.close()
    for suffix in ("-wal", "-shm"):  # checkpointed on close; what is left is the main file
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("keep", [0.5, 40], ids=["truncated-mid-file", "truncated-header"])
def test_a_truncated_cache_is_moved_aside_and_replaced(tmp_path, caplog, keep):
    path = tmp_path / "requests.sqlite"
    filled_cache(path)
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(int(size * keep) if keep < 1 else int(keep))
    cache = RequestCache(path)
    # The damage shows at open (a cut header) or at the first read of a lost page; either way the cache goes on.
    found = cache.get_many([f"key-{i}" for i in range(400)])
    cache.put_many([("fresh", Reply(text="new"))])
    assert cache.get_many(["fresh"])["fresh"].text == "new"
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside, "the damaged file is kept next to the new one"
    assert len(found) < 400
    assert "is damaged" in caplog.text and str(aside[0].name).split("-wal")[0] in caplog.text


def sweep_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "experiments.sweep", "--config", str(config), "--no-progress", *extra]


def tiny_config(tmp_path: Path, sweep: str, settings: str = "[L0]") -> Path:
    path = tmp_path / f"{sweep}.yaml"
    path.write_text(f"""study: infilling
sweep: {sweep}
data: {REPO / 'data' / 'infilling' / 'sample.jsonl'}
limit: 2
models: [smollm2]
prompt_settings: {settings}
generation: {{max_new_tokens: 12}}
metrics: {{names: [chrf]}}
report_dir: {tmp_path / 'reports' / '{sweep}'}
""")
    return path


@pytest.mark.slow
def test_a_sweep_goes_on_past_a_corrupt_cache(tmp_path):
    cache = tmp_path / "requests.sqlite"
    filled_cache(cache)
    with cache.open("r+b") as handle:
        handle.truncate(cache.stat().st_size // 3)
    env = {**os.environ, "NARRATIVE_EVAL_CACHE": str(cache)}
    result = subprocess.run(sweep_command(tiny_config(tmp_path, "corrupt-cache")), cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "request cache" in result.stderr and "is damaged" in result.stderr
    assert "cells: 1 finished" in result.stdout
    assert any(".corrupt-" in p.name for p in tmp_path.iterdir())


# --------------------------------------------------------------------------- a tracking server that goes away


class MlflowServer:
    """A real `mlflow server` on 127.0.0.1 with a SQLite store and proxied artifacts in a folder; restarts on its port."""

    def __init__(self, root: Path):
        self.root, self.port, self.process = root, free_port(), None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process, _ = start_mlflow(["--backend-store-uri", f"sqlite:///{self.root / 'server.db'}",
                                        "--artifacts-destination", str(self.root / "artifacts")],
                                       self.root / "server.log", port=self.port)

    def kill(self) -> None:
        """SIGKILL the server and its workers (its own process group), by PID."""
        stop(self.process, signal.SIGKILL)


def _cell_runs(url: str, sweep: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    experiment = client.get_experiment_by_name("infilling")
    if experiment is None:
        return []
    return client.search_runs([experiment.experiment_id],
                              f"tags.`narrative_eval.kind` = 'cell' and tags.`narrative_eval.sweep` = '{sweep}'")


@pytest.mark.slow
@pytest.mark.server
def test_a_tracking_server_killed_mid_sweep_fails_clearly_and_the_rerun_resumes(tmp_path):
    """The server dies while a cell runs: the sweep says so (no traceback); rerun after a restart finishes, no duplicate."""
    server = MlflowServer(tmp_path)
    server.start()
    sweep = "server-outage"
    config = tiny_config(tmp_path, sweep, "[L0, L2]")
    # Few, short client retries so the outage outlasts them within the test's time; a killed server refuses at once,
    # so the request timeout is only a safety net (a loaded server may take seconds to answer a request it does get).
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
           "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "120",
           "NARRATIVE_EVAL_CACHE": str(tmp_path / "requests.sqlite")}
    env.pop("NARRATIVE_EVAL_ARTIFACT_ROOT", None)
    process = subprocess.Popen(sweep_command(config), cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)

    def cell_run_made() -> bool:
        assert process.poll() is None, process.communicate()[1][-3000:]
        return bool(_cell_runs(server.url, sweep))

    wait_until(cell_run_made, "the sweep's first cell run on the tracking server")
    server.kill()
    out, err = process.communicate(timeout=600)
    assert process.returncode != 0, out[-2000:]
    assert "Traceback" not in err, err[-4000:]
    assert f"error: the tracking server at {server.url} stopped answering" in err, err[-3000:]

    server.start()
    rerun = subprocess.run(sweep_command(config), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    runs = _cell_runs(server.url, sweep)
    names = sorted(run.info.run_name for run in runs)
    assert len(names) == len(set(names)) == 2, names  # one run per cell: resumed, never duplicated
    assert {run.info.status for run in runs} == {"FINISHED"}
    server.kill()
