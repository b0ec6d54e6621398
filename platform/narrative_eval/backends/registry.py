"""Loading backends by name: one instance per model spec per process (the registry lives in base.py)."""

from __future__ import annotations

import atexit
import threading

from narrative_eval.backends.base import BACKENDS, Backend
from narrative_eval.records import ModelSpec

_loaded: dict[str, Backend] = {}
_lock = threading.Lock()
_release_at_exit = False


def backend_class(name: str) -> type[Backend]:
    """The Backend class registered under `name`."""
    return BACKENDS.get(name)


def get_backend(spec: ModelSpec) -> Backend:
    """The process-wide backend for a model spec (models load once per process)."""
    global _release_at_exit
    key = spec.digest()
    with _lock:
        if key not in _loaded:
            _loaded[key] = backend_class(spec.backend)(spec)
            if not _release_at_exit:
                # Registered after the first engine has loaded, hence after multiprocessing's own exit hook,
                # so it runs first: that hook joins child processes, and a sweep that left its vLLM engine
                # open hung there after printing its last line.
                atexit.register(release_all)
                _release_at_exit = True
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
