"""Shared fixtures for the backend tests: the embedded SmolLM2 GGUF, engines loaded once, and the models the tests
make (dequantized exports, GPTQ/AWQ checkpoints, vLLM conversions) kept between runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# api_server.py sits beside the tests; make it importable without a tests package.
sys.path.insert(0, str(Path(__file__).parent))

from narrative_eval.records import Message, ModelSpec  # noqa: E402
from narrative_eval.weights import resolve_weights  # noqa: E402
from tests.made_models import converted_models  # noqa: E402

SMOLLM = "embedded:smollm2-135m-instruct"
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def model_cache():
    """The converted-model cache of the vLLM tests, kept between runs so each GGUF is converted once; set only while
    a module that asks for it runs.

    A machine that already sets NARRATIVE_EVAL_MODEL_CACHE keeps it (and its converted models).
    """
    saved = os.environ.get("NARRATIVE_EVAL_MODEL_CACHE")
    path = converted_models()
    os.environ["NARRATIVE_EVAL_MODEL_CACHE"] = path
    yield path
    if saved is None:
        os.environ.pop("NARRATIVE_EVAL_MODEL_CACHE", None)


@pytest.fixture(scope="session")
def smollm_path() -> str:
    return resolve_weights(SMOLLM)


@pytest.fixture(scope="session")
def conversations() -> list[list[Message]]:
    """Three short conversations, one of them multi-turn, read from the test data file."""
    import yaml

    raw = yaml.safe_load((DATA / "conversations.yaml").read_text())
    return [[Message(**m) for m in conversation] for conversation in raw["conversations"]]


@pytest.fixture(scope="session")
def judge_schema() -> dict:
    import yaml

    return yaml.safe_load((DATA / "conversations.yaml").read_text())["judge_schema"]


@pytest.fixture(scope="session")
def llama_backend():
    from narrative_eval.backends.llama_cpp import LlamaCppBackend

    backend = LlamaCppBackend(ModelSpec(id="smollm2", weights=SMOLLM, options={"n_ctx": 1024}))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def api_server(smollm_path):
    from api_server import ApiServer

    with ApiServer(smollm_path, api_key="test-key-123") as server:
        yield server
