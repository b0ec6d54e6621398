"""Fixtures shared by the vLLM test modules (imported by them; pytest finds fixtures in their namespace)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """One converted-model cache for the whole test session, so each GGUF is converted once.

    A machine that already sets NARRATIVE_EVAL_MODEL_CACHE keeps it (and its converted models).
    """
    saved = os.environ.get("NARRATIVE_EVAL_MODEL_CACHE")
    path = saved or str(tmp_path_factory.getbasetemp() / "hf-models")
    os.environ["NARRATIVE_EVAL_MODEL_CACHE"] = path
    yield path
    if saved is None:
        os.environ.pop("NARRATIVE_EVAL_MODEL_CACHE", None)
