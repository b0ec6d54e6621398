"""Models the tests make (dequantized exports, GPTQ/AWQ checkpoints, vLLM conversions), kept between runs.

A second `make test` on the same clone skips minutes of quantizing and converting; delete `.cache/test-models` to
make them again. Each lives in a folder keyed by everything that shapes it, so a stale one is never reused.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MADE_MODELS = REPO / ".cache" / "test-models"


def made_model_key(*inputs: str, sources: tuple[str, ...] = (), libraries: tuple[str, ...] = ()) -> str:
    """A short digest of what shapes a made model: its inputs, the text of the project's modules that make it
    (an edit to one makes it again) and the versions of the libraries that do the work."""
    digest = hashlib.sha256()
    for text in inputs:
        digest.update(text.encode() + b"\0")
    for module in sources:
        digest.update((REPO / "platform" / "narrative_eval" / module).read_bytes())
    for library in libraries:
        digest.update(importlib.metadata.version(library).encode() + b"\0")
    return digest.hexdigest()[:16]


def converted_models() -> str:
    """Where the vLLM tests keep the embedded GGUF models converted to Hugging Face format (each converted once):
    NARRATIVE_EVAL_MODEL_CACHE where the machine sets it, else a folder keyed by the converter and its libraries."""
    key = made_model_key(sources=("weights/convert.py",), libraries=("transformers", "safetensors", "gguf"))
    return os.environ.get("NARRATIVE_EVAL_MODEL_CACHE") or str(MADE_MODELS / f"hf-models-{key}")
