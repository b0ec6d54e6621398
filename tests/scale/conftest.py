"""Real servers for the scale-out tests: a throwaway PostgreSQL cluster and an MLflow tracking server on it.

Both listen on 127.0.0.1 on free ports, live in a temporary directory, and are stopped by PID
(the postmaster's, the server's process group) when the test module ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port, start_mlflow, stop

# PostgreSQL refuses to run as root; as root the cluster runs as this system account.
POSTGRES_USER = "postgres"
POSTGRES_PACKAGES = ("postgresql",)
MLFLOW_DATABASE = "mlflow"


def postgres_bin_dir() -> Path:
    """The newest installed PostgreSQL server's bin directory, installing the Debian package if none is there."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", *POSTGRES_PACKAGES], check=True, env=env, timeout=900)
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        pytest.fail("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin after installing them")
    return Path(found[-1]).parent


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", POSTGRES_USER, "--", *command]


def _wait_until(check, what: str, timeout: float, process: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            pytest.fail(f"{what} exited with {process.returncode} before it was ready:\n{tail}")
        try:
            if check():
                return
        except Exception as error:  # not up yet
            last_error = error
        time.sleep(0.5)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    pytest.fail(f"{what} not ready after {timeout:.0f} s ({last_error}):\n{tail}")


@dataclass
class PostgresServer:
    """A running throwaway PostgreSQL cluster."""

    port: int
    """TCP port on 127.0.0.1."""
    data_dir: Path
    """The cluster's data directory."""
    pid: int
    """The postmaster's PID."""

    def url(self, database: str) -> str:
        return f"postgresql://{POSTGRES_USER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user=POSTGRES_USER, dbname=database, connect_timeout=3)


@dataclass
class MlflowServer:
    """A running `mlflow server` on PostgreSQL with served artifacts."""

    url: str
    """Tracking URI, http://127.0.0.1:<port>."""
    artifacts: Path
    """--artifacts-destination: where the server stores artifacts."""
    pid: int
    """PID (and process-group id) of the server."""


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    pytest.importorskip("psycopg2", reason="the postgres extra (psycopg2-binary) is not installed")
    bin_dir = postgres_bin_dir()
    # Not under pytest's tmp_path: its parents are private to root, and the server user must reach the directory.
    root = Path(tempfile.mkdtemp(prefix="narrative-eval-pg-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        account = pwd.getpwnam(POSTGRES_USER)
        os.chown(root, account.pw_uid, account.pw_gid)
    data_dir, socket_dir, log = root / "data", root / "sock", root / "postgres.log"
    subprocess.run(_as_server_user(["mkdir", "-p", str(socket_dir)]), check=True)
    subprocess.run(
        _as_server_user([str(bin_dir / "initdb"), "-D", str(data_dir), "-U", POSTGRES_USER, "--auth=trust",
                         "-E", "UTF8", "--no-sync"]),
        check=True, capture_output=True, timeout=180,
    )
    port = free_port()
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            _as_server_user([str(bin_dir / "postgres"), "-D", str(data_dir), "-p", str(port), "-k", str(socket_dir),
                             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]),
            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
    server = PostgresServer(port=port, data_dir=data_dir, pid=process.pid)
    try:
        _wait_until(lambda: server.connect().close() is None, "PostgreSQL", 180, process, log)
        # The postmaster, not the runuser wrapper, is the process to signal.
        server.pid = int((data_dir / "postmaster.pid").read_text().split()[0])
        connection = server.connect()
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {MLFLOW_DATABASE}")
        connection.close()
        yield server
    finally:
        _stop_postgres(server, process)
        shutil.rmtree(root, ignore_errors=True)


def _stop_postgres(server: PostgresServer, process: subprocess.Popen) -> None:
    try:
        os.kill(server.pid, signal.SIGINT)  # fast shutdown: disconnect clients, checkpoint, exit
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(server.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def mlflow_server(postgres_server, tmp_path_factory) -> Iterator[MlflowServer]:
    root = tmp_path_factory.mktemp("mlflow-server")
    artifacts = root / "artifacts"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT")}
    process, url = start_mlflow(["--backend-store-uri", postgres_server.url(MLFLOW_DATABASE), "--serve-artifacts",
                                 "--artifacts-destination", str(artifacts)], root / "server.log", env, timeout=180)
    try:
        yield MlflowServer(url=url, artifacts=artifacts, pid=process.pid)
    finally:
        stop(process)
