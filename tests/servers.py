"""Real servers the tests start on 127.0.0.1: a free port, an MLflow server (or `mlflow ui`), the Gradio app and a Ray
head, each in its own process group, waited for until it answers, stopped by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_mlflow(arguments: list[str], log: Path, env: dict[str, str] | None = None, command: str = "server",
                 port: int | None = None, timeout: float = 300) -> tuple[subprocess.Popen, str]:
    """`mlflow <command> <arguments>` on `port` (default: a free one); returns the process and its URL once /health
    answers."""
    port = port or free_port()
    mlflow_cli = str(Path(sys.executable).with_name("mlflow"))
    # The server's web workers are its children, in its process group: they stop with it.
    url = f"http://127.0.0.1:{port}"
    # Without MLflow's job runner: it starts eight Huey consumer processes (about 40 CPU s a server on 2 cores) for
    # server-side jobs that nothing here submits.
    env = {**(os.environ if env is None else env), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    process = _start([mlflow_cli, command, *arguments, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                     answers_http(f"{url}/health"), log, env, log.parent, timeout, f"mlflow {command}")
    return process, url


def start_app(arguments: list[str], log: Path, env: dict[str, str] | None = None,
              timeout: float = 300) -> tuple[subprocess.Popen, str]:
    """`python -m ui <arguments>` from the repository root on a free port; returns the process and its URL (ending
    in /) once the page answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    # Unbuffered, so whatever the app prints while it handles an event is in the log once the page shows the event's
    # outcome: a test reads the log then, instead of waiting a while for a buffer to be flushed.
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    process = _start([sys.executable, "-m", "ui", "--port", str(port), *arguments], answers_http(url), log, env, REPO,
                     timeout, "the app")
    return process, url


def start_ray_head(root: Path, cpus: int, timeout: float = 300) -> tuple[subprocess.Popen, str]:
    """`ray start --head --block` with `cpus` CPUs, its temporary files and head.log in `root`; returns the process and
    the address a sweep joins (host:port) once its port accepts connections. `--block` keeps the head's processes
    in its group, so they stop with it."""
    port = free_port()
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
               f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false", "--disable-usage-stats",
               f"--temp-dir={root}"]
    process = _start(command, accepts_connections(port), root / "head.log", None, root, timeout, "the Ray head")
    return process, f"127.0.0.1:{port}"


def answers_http(url: str) -> Callable[[], bool]:
    def answers() -> bool:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200

    return answers


def accepts_connections(port: int) -> Callable[[], bool]:
    def accepts() -> bool:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True

    return accepts


def _start(command: list[str], ready: Callable[[], bool], log: Path, env: dict[str, str] | None, cwd: Path,
           timeout: float, what: str) -> subprocess.Popen:
    """Start `command` in its own process group, output to `log`, and wait until `ready()` (an OSError counts as not
    yet); RuntimeError with the log's tail if it exits or `timeout` passes first."""
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                   start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return process
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"{what} did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.5)


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 30) -> None:
    """Signal the process group by PID and wait for it; a group still there after `grace` seconds is killed (a server
    caught half-started on a loaded machine may not handle SIGTERM yet)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
