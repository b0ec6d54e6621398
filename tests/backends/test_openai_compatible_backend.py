"""openai_compatible against llama-cpp-python's own OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import urllib.request

import pytest

from narrative_eval.backends.base import usable_cores
from narrative_eval.records import GenerationParams, Message, ModelSpec
from tests.waiting import wait_until

pytest.importorskip("openai")
SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.server,
              pytest.mark.skipif(bool(missing), reason=f"llama-cpp-python[server] extra not installed (missing {missing})")]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(smollm_path, tmp_path_factory):
    port = free_port()
    log = open(tmp_path_factory.mktemp("llama-server") / "server.log", "w")
    threads = str(usable_cores())
    command = [sys.executable, "-m", "llama_cpp.server", "--model", smollm_path, "--model_alias", "smollm2",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", threads,
               "--n_threads_batch", threads]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"

    def answers() -> bool:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}; see {log.name}")
        with urllib.request.urlopen(f"{base_url}/models", timeout=10):
            return True

    try:
        wait_until(answers, f"llama_cpp.server to answer (see {log.name})", interval=0.3)
    except AssertionError:
        process.kill()
        raise
    yield base_url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture(scope="module")
def backend(llama_server):
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    spec = ModelSpec(id="smollm2-server", backend="openai_compatible", weights="smollm2",
                     options={"base_url": llama_server, "revision": "smollm2-q4_1", "max_concurrency": 2})
    instance = OpenAICompatibleBackend(spec)
    yield instance
    instance.close()


def test_batch_with_multi_turn(backend, conversations):
    replies = backend.generate(conversations, GenerationParams(temperature=0.0, max_new_tokens=24, seed=3))
    assert all(r.ok and r.text.strip() for r in replies)
    assert all(r.prompt_tokens > 0 and 0 < r.completion_tokens <= 24 for r in replies)
    assert replies[2].prompt_tokens > replies[1].prompt_tokens


def test_json_schema_in_the_llama_cpp_form(llama_server, judge_schema):
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    spec = ModelSpec(id="smollm2-server", backend="openai_compatible", weights="smollm2",
                     options={"base_url": llama_server, "json_mode": "json_object_schema"})
    backend = OpenAICompatibleBackend(spec)
    conversation = [Message(role="user", content="Rate 'The cat sat.' from 1 to 5 with a reason.")]
    reply = backend.generate([conversation], GenerationParams(temperature=0.0, max_new_tokens=80, json_schema=judge_schema))[0]
    assert reply.ok
    verdict = json.loads(reply.text)
    assert isinstance(verdict["score"], int) and isinstance(verdict["reason"], str)


def test_unsupported_structured_output_is_an_error_reply(llama_server, judge_schema):
    # llama-cpp-python's server rejects response_format type 'json_schema' (and reports it
    # as HTTP 500): the request ends as an error reply and the batch goes on.
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    spec = ModelSpec(id="smollm2-server", backend="openai_compatible", weights="smollm2",
                     options={"base_url": llama_server, "max_attempts": 2, "retry_base_delay": 0.01})
    backend = OpenAICompatibleBackend(spec)
    conversations = [[Message(role="user", content="Rate 'The cat sat.'")], [Message(role="user", content="Hi")]]
    replies = backend.generate(conversations, GenerationParams(max_new_tokens=8, json_schema=judge_schema))
    assert all(r.finish_reason == "error" and "response_format" in r.error for r in replies)


def test_seed_reproducible(backend, conversations):
    def sample(seed: int) -> str:
        return backend.generate(conversations[:1], GenerationParams(temperature=1.0, max_new_tokens=20, seed=seed))[0].text

    assert sample(9) == sample(9)


def test_stream(backend, conversations):
    pieces = list(backend.stream(conversations[1], GenerationParams(temperature=0.0, max_new_tokens=16)))
    assert len(pieces) > 1 and "".join(pieces).strip()


def test_identity_has_model_and_revision_only(backend):
    assert backend.identity() == "openai_compatible:smollm2@smollm2-q4_1"


def test_unreachable_server_is_an_error_reply(conversations):
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend

    spec = ModelSpec(id="nowhere", backend="openai_compatible", weights="m",
                     options={"base_url": f"http://127.0.0.1:{free_port()}/v1", "max_attempts": 2, "retry_base_delay": 0.01})
    reply = OpenAICompatibleBackend(spec).generate(conversations[:1], GenerationParams())[0]
    assert reply.finish_reason == "error" and "2 attempt" in reply.error
