"""Backend registry: one file per engine, one registration line each."""

from __future__ import annotations

import importlib
import threading

from narrative_eval.backends.base import Backend
from narrative_eval.records import ModelSpec

# name -> "module:Class"; modules are imported only when used, so optional engines
# (vllm, gptqmodel, SDKs) are never needed unless a config names them.
BACKENDS: dict[str, str] = {
    "llama_cpp": "narrative_eval.backends.llama_cpp:LlamaCppBackend",
    "transformers": "narrative_eval.backends.transformers_backend:TransformersBackend",
    "vllm": "narrative_eval.backends.vllm_backend:VllmBackend",
    "openai_compatible": "narrative_eval.backends.openai_compatible:OpenAICompatibleBackend",
    "openai": "narrative_eval.backends.openai_backend:OpenAIBackend",
    "anthropic": "narrative_eval.backends.anthropic_backend:AnthropicBackend",
}

_loaded: dict[str, Backend] = {}
_lock = threading.Lock()


def register_backend(name: str, target: str) -> None:
    """Register a backend class by import path ('package.module:Class')."""
    BACKENDS[name] = target


def backend_class(name: str) -> type[Backend]:
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; registered: {', '.join(sorted(BACKENDS))}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def get_backend(spec: ModelSpec) -> Backend:
    """The process-wide backend for a model spec (models load once per process)."""
    key = spec.digest()
    with _lock:
        if key not in _loaded:
            _loaded[key] = backend_class(spec.backend)(spec)
        return _loaded[key]


def release_all() -> None:
    """Close every loaded backend (frees model memory between cells when asked)."""
    with _lock:
        for backend in _loaded.values():
            backend.close()
        _loaded.clear()
