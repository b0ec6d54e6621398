"""Shared fixtures: a throwaway MLflow store and request cache for the whole test session,
and the embedded models loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # The dependencies' known harmless warnings are listed once, in narrative_eval.quiet; the summary shows the rest.
    from narrative_eval.quiet import KNOWN_WARNINGS

    for known in KNOWN_WARNINGS:
        config.addinivalue_line("filterwarnings", known.pytest_filter())


@pytest.fixture(scope="session", autouse=True)
def isolated_stores(tmp_path_factory):
    """Tests never write into the repo's mlflow.db, mlruns/ or request cache."""
    root = tmp_path_factory.mktemp("stores")
    saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT", "NARRATIVE_EVAL_CACHE")}
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow.db'}"
    os.environ["NARRATIVE_EVAL_ARTIFACT_ROOT"] = str(root / "artifacts")
    os.environ["NARRATIVE_EVAL_CACHE"] = str(root / "requests.sqlite")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def smollm2_spec():
    from narrative_eval.records import ModelSpec

    return ModelSpec(id="smollm2", backend="llama_cpp", weights="embedded:smollm2-135m-instruct", quantization="gguf-q4_1")


@pytest.fixture(scope="session")
def gemma3_spec():
    from narrative_eval.records import ModelSpec

    return ModelSpec(id="gemma3", backend="llama_cpp", weights="embedded:gemma3-270m", quantization="gguf-q4_k_m",
                     chat_format="gemma")


@pytest.fixture(scope="session")
def smollm2(smollm2_spec):
    """The embedded SmolLM2 backend, loaded once for the session."""
    from narrative_eval.backends import get_backend

    return get_backend(smollm2_spec)


@pytest.fixture(scope="session")
def gemma3(gemma3_spec):
    from narrative_eval.backends import get_backend

    return get_backend(gemma3_spec)
