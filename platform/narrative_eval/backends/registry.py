"""Loading backends by name: one instance per model spec per process (the registry lives in base.py)."""

from __future__ import annotations

import atexit
import threading

from narrative_eval.backends.base import BACKENDS, Backend
from narrative_eval.records import ModelSpec

_loaded: dict[str, Backend] = {}
_lock = threading.Lock()


def backend_class(name: str) -> type[Backend]:
    """The Backend class registered under `name`."""
    return BACKENDS.get(name)


def get_backend(spec: ModelSpec) -> Backend:
    """The process-wide backend for a model spec (models load once per process)."""
    key = spec.digest()
    with _lock:
        if key not in _loaded:
            _loaded[key] = backend_class(spec.backend)(spec)
            # Re-registered after each load so it stays the last exit hook, and runs first: multiprocessing's
            # hook joins child processes, and a sweep that left its vLLM engine open hung there after its last line.
            atexit.unregister(release_all)
            atexit.register(release_all)
        return _loaded[key]


def release(spec: ModelSpec) -> None:
    """Close the backend loaded for a model spec and forget it (its next get_backend loads it again); none loaded: nothing."""
    with _lock:
        loaded = _loaded.pop(spec.digest(), None)
    if loaded is not None:
        loaded.close()


def release_all() -> None:
    """Close every loaded backend (frees model memory between cells when asked)."""
    with _lock:
        for loaded in _loaded.values():
            loaded.close()
        _loaded.clear()
