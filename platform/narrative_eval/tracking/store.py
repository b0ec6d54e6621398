"""The tracking store: where it is, a client for it, the tags that find runs in it, safe concurrent first use
of a new SQLite store, and telling an unreachable tracking server from other errors."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from pathlib import Path

from narrative_eval.lazy import lazy_module

mlflow = lazy_module("mlflow")

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
TAG_KIND = "narrative_eval.kind"
TAG_SWEEP = "narrative_eval.sweep"
TAG_SPEC_HASH = "narrative_eval.spec_hash"
TAG_PARENT = "mlflow.parentRunId"

_prepared: set[str] = set()
_prepare_lock = threading.Lock()


def _sqlite_file(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?", 1)[0]).resolve()


def prepare_store(uri: str) -> None:
    """Open a SQLite store once under a file lock, so concurrent first starts do not all migrate its schema.

    MLflow creates and migrates the schema on the first connection; two processes doing that at once
    on a new file crash (``duplicate column name``). The first holder migrates, the others then find
    the schema current. The lock lives in the temp folder, keyed by the store's absolute path.
    """
    with _prepare_lock:
        if uri in _prepared:
            return
        database = _sqlite_file(uri)
        if database is not None:
            key = hashlib.sha256(str(database).encode()).hexdigest()[:16]
            lock_path = Path(tempfile.gettempdir()) / f"narrative-eval-store-{key}.lock"
            with open(lock_path, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
        _prepared.add(uri)


def unreachable(error: BaseException) -> bool:
    """True when an error (or one it arose from) says the tracking server could not be reached."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = f"{type(error).__name__}: {error}"
        if any(marker in text for marker in ("ConnectionError", "Max retries exceeded", "Connection refused",
                                              "RemoteDisconnected", "ConnectTimeout")):
            return True
        error = error.__cause__ or error.__context__
    return False


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else the project default (sqlite file in the working directory)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def client() -> mlflow.MlflowClient:
    uri = tracking_uri()
    prepare_store(uri)
    mlflow.set_tracking_uri(uri)
    return mlflow.MlflowClient(tracking_uri=uri)


def experiment_id(name: str) -> str:
    c = client()
    experiment = c.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            c.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id
    # NARRATIVE_EVAL_ARTIFACT_ROOT keeps artifacts of a throwaway store (tests) out of the repo's mlruns/.
    root = os.environ.get("NARRATIVE_EVAL_ARTIFACT_ROOT")
    location = f"{Path(root).resolve().as_uri()}/{name}" if root else None
    try:
        return c.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:
        # Another process created it in the meantime.
        return c.get_experiment_by_name(name).experiment_id


def find_runs(experiment: str, filter_string: str) -> list:
    c = client()
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return c.search_runs([exp.experiment_id], filter_string=filter_string, max_results=5000)
