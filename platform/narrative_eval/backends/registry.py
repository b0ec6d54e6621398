"""Loading backends by name: one instance per model spec per process (the registry lives in base.py), each with the
engine processes its load started, which stop when it is released."""

from __future__ import annotations

import atexit
import os
import threading

import psutil

from narrative_eval.backends.base import BACKENDS, Backend, SlowStart
from narrative_eval.backends.processes import own_children, started_processes, stop_processes
from narrative_eval.records import ModelSpec
from narrative_eval.weights import on_this_machine

_loaded: dict[str, Backend] = {}
_engines: dict[str, list[psutil.Process]] = {}
"""Spec digest -> the child processes its backend started while loading."""
_lock = threading.Lock()


def backend_class(name: str) -> type[Backend]:
    """The Backend class registered under `name`."""
    return BACKENDS.get(name)


def missing(spec: ModelSpec) -> str | None:
    """What a model lacks to run from this machine, said briefly ('needs OPENAI_API_KEY', 'needs a server',
    'needs a download', 'needs a CUDA GPU (...)', or two of them joined by 'and'); None when it runs as it is.
    Loads nothing. The one check of the app's Launch and Fill live and the command line's dry run."""
    if spec.backend not in BACKENDS:
        return f"needs the {spec.backend} backend"
    engine = backend_class(spec.backend)
    key = engine.key_env(spec)
    if key:
        return None if os.environ.get(key) else f"needs {key}"
    if engine.hosted:
        return "needs a server"  # a server that takes no key: nothing tells whether it is up
    needs = [] if on_this_machine(spec.weights) else ["needs a download"]
    device = engine.device_need(spec)
    if device:
        needs.append(device)
    return needs[0] + "".join(f" and {need.removeprefix('needs ')}" for need in needs[1:]) if needs else None


def gpus_for(spec: ModelSpec) -> int:
    """GPUs the model holds once loaded, as its backend says (an unknown backend: none; its load fails and says why)."""
    return backend_class(spec.backend).gpus_for(spec) if spec.backend in BACKENDS else 0


def slow_start(spec: ModelSpec) -> SlowStart | None:
    """How long the model takes to load when that is long enough to say (its backend's estimate); None otherwise."""
    return backend_class(spec.backend).slow_start(spec) if spec.backend in BACKENDS else None


def get_backend(spec: ModelSpec) -> Backend:
    """The process-wide backend for a model spec (models load once per process)."""
    key = spec.digest()
    with _lock:
        if key not in _loaded:
            with started_processes() as started:
                _loaded[key] = backend_class(spec.backend)(spec)
            _engines[key] = started
            # Re-registered after each load so it stays the last exit hook, and runs first: multiprocessing's
            # hook joins child processes, and a sweep that left its vLLM engine open hung there after its last line.
            atexit.unregister(release_all)
            atexit.register(release_all)
        return _loaded[key]


def release(spec: ModelSpec) -> None:
    """Close the backend loaded for a model spec, stop the engine processes it started, and forget it (its next
    get_backend loads it again); none loaded: nothing."""
    with _lock:
        loaded = _loaded.pop(spec.digest(), None)
        engines = _engines.pop(spec.digest(), [])
    if loaded is not None:
        loaded.close()
    stop_processes(engines)


def release_all() -> None:
    """Close every loaded backend and stop its engine processes (frees model memory between cells when asked)."""
    with _lock:
        for loaded in _loaded.values():
            loaded.close()
        engines = [process for started in _engines.values() for process in started]
        _loaded.clear()
        _engines.clear()
    stop_processes(engines)


def stop_engines() -> None:
    """Before a process that loads models while it serves (the app) exits: no engine process outlives it.

    The engines of a load still under way are stopped first (that load then fails at once instead of holding the
    registry for a minute), then every loaded backend is closed, then any child process still running in this
    process's session is stopped (one a backend started after its load)."""
    tracked = {process.pid for started in list(_engines.values()) for process in started}
    stop_processes([child for child in own_children() if child.pid not in tracked])
    release_all()
    stop_processes(own_children())
