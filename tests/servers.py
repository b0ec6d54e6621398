"""Real servers the tests start on 127.0.0.1: a free port, and an MLflow server (or `mlflow ui`) in its own process
group, waited for until it answers /health, stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


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
    with open(log, "ab") as out:
        # Its own process group: the server's web workers are its children and stop with it.
        process = subprocess.Popen([mlflow_cli, command, *arguments, "--host", "127.0.0.1", "--port", str(port),
                                    "--workers", "1"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=log.parent, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=3) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"mlflow {command} did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.5)


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Signal the process group by PID and wait for it."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    process.wait(timeout=30)
