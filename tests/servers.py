"""Real servers the tests start on 127.0.0.1: a free port, an MLflow server (or `mlflow ui`) and the Gradio app, each
in its own process group, waited for until it answers, stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_mlflow(arguments: list[str], log: Path, env: dict[str, str] | None = None, command: str = "server",
                 port: int | None = None, timeout: float = 180) -> tuple[subprocess.Popen, str]:
    """`mlflow <command> <arguments>` on `port` (default: a free one); returns the process and its URL once /health
    answers."""
    port = port or free_port()
    mlflow_cli = str(Path(sys.executable).with_name("mlflow"))
    # The server's web workers are its children, in its process group: they stop with it.
    return _start([mlflow_cli, command, *arguments, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                  f"http://127.0.0.1:{port}", "/health", log, env, log.parent, timeout, f"mlflow {command}")


def start_app(arguments: list[str], log: Path, env: dict[str, str] | None = None,
              timeout: float = 180) -> tuple[subprocess.Popen, str]:
    """`python -m ui <arguments>` from the repository root on a free port; returns the process and its URL (ending
    in /) once the page answers."""
    port = free_port()
    return _start([sys.executable, "-m", "ui", "--port", str(port), *arguments], f"http://127.0.0.1:{port}/", "",
                  log, env, REPO, timeout, "the app")


def _start(command: list[str], url: str, probe: str, log: Path, env: dict[str, str] | None, cwd: Path,
           timeout: float, what: str) -> tuple[subprocess.Popen, str]:
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                   start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}{probe}", timeout=3) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"{what} did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.5)


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Signal the process group by PID and wait for it."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    process.wait(timeout=30)
