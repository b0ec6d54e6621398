"""Inference backends behind one interface, with the shared request cache.

A backend is one file here with `@backend(name)` on its Backend subclass, plus its module name in
`BACKENDS` (base.py), which imports it only when a config names a backend.
"""

from narrative_eval.backends.base import BACKENDS, Backend, Conversation, SlowStart, backend, in_batches
from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.backends.registry import (backend_class, get_backend, missing, release, release_all, slow_start,
                                              stop_engines)

__all__ = [
    "in_batches",
    "BACKENDS",
    "Backend",
    "CachedBackend",
    "Conversation",
    "RequestCache",
    "SlowStart",
    "backend",
    "backend_class",
    "get_backend",
    "missing",
    "release",
    "release_all",
    "request_key",
    "slow_start",
    "stop_engines",
]
