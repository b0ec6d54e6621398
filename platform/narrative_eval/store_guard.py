"""Keeping a tracking store usable: safe concurrent first use of a new SQLite store, and telling an unreachable
tracking server from other errors."""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
import threading
from pathlib import Path

from mlflow.tracking import MlflowClient

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
                    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
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
