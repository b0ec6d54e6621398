"""Inference backends behind one interface, with the shared request cache."""

from narrative_eval.backends.base import Backend, Conversation
from narrative_eval.backends.cache import CachedBackend, RequestCache, request_key
from narrative_eval.backends.registry import BACKENDS, backend_class, get_backend, register_backend, release_all

__all__ = [
    "BACKENDS",
    "Backend",
    "CachedBackend",
    "Conversation",
    "RequestCache",
    "backend_class",
    "get_backend",
    "register_backend",
    "release_all",
    "request_key",
]
