"""Inference backends behind one interface, with the shared request cache.

A backend is one file here with `@backend(name)` on its Backend subclass, plus its module name in
`BACKENDS` (base.py), which imports it only when a config names a backend.
"""

from narrative_eval.backends.base import BACKENDS, Backend, Conversation, backend
from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.backends.registry import backend_class, get_backend, release, release_all

__all__ = [
    "BACKENDS",
    "Backend",
    "CachedBackend",
    "Conversation",
    "RequestCache",
    "backend",
    "backend_class",
    "get_backend",
    "release",
    "release_all",
    "request_key",
]
