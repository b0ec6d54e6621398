"""Backends declare what they can do (hosted, the key they need, a batch API, GPUs, a slow start) on their class, and
every caller reads it from the registry: a backend registered from outside the project is treated by what it
declares, never by its name. The engine processes a backend starts stop when its model is released."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import psutil
import pytest

from narrative_eval.backends import BACKENDS, Backend, SlowStart, backend, get_backend, missing, release, slow_start
from narrative_eval.backends.batch import batch_enabled, batchable
from narrative_eval.backends.batch_providers import OpenAIBatches
from narrative_eval.backends.processes import own_children, started_processes
from narrative_eval.config import load_config
from narrative_eval.executors.ray import cell_resources
from narrative_eval.records import GenerationParams, ModelSpec, Reply
from narrative_eval.sweep import expand_grid
from tests.waiting import wait_until

KEY = "CAPABILITY_DEMO_KEY"
SLEEPER = [sys.executable, "-c", "import threading; threading.Event().wait()"]
"""A process that runs until it is stopped."""
SIGNAL_RECORDER = """
import pathlib, signal, sys, threading
record = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (record.write_text("SIGTERM"), sys.exit(0)))
record.write_text("ready")
threading.Event().wait()
"""
"""A process that runs until it is stopped and writes to the file it is given 'ready' once it handles SIGTERM, then
'SIGTERM' when that came (a SIGKILL leaves 'ready')."""


class EchoBackend(Backend):
    """Replies with the last message; subclasses below declare capabilities."""

    def generate(self, conversations: Sequence, params: GenerationParams) -> list[Reply]:
        return [Reply(text=conversation[-1].content) for conversation in conversations]


class HostedWithBatches(EchoBackend):
    hosted = True

    @classmethod
    def key_env(cls, spec: ModelSpec) -> str | None:
        return KEY

    def batch_api(self):
        return OpenAIBatches(self)


class GpuEngine(EchoBackend):
    @classmethod
    def gpus_for(cls, spec: ModelSpec) -> int:
        return int(spec.options.get("shards", 1)) * 2

    @classmethod
    def slow_start(cls, spec: ModelSpec) -> SlowStart | None:
        return SlowStart(90.0, "demo engine: a minute and a half to start")


class EngineProcess(EchoBackend):
    """Starts a child process when its model loads and leaves it running on close, as an engine server would."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        record = spec.options.get("signal_record")
        self.server = subprocess.Popen([sys.executable, "-c", SIGNAL_RECORDER, record] if record else SLEEPER)
        if spec.options.get("fail"):
            raise RuntimeError("the engine did not start")


@pytest.fixture()
def registered():
    """The demo backends under names no project module uses, forgotten afterwards."""
    names = {"demo_hosted": HostedWithBatches, "demo_gpu": GpuEngine, "demo_process": EngineProcess}
    for name, cls in names.items():
        backend(name)(cls)
    yield names
    for name in names:
        BACKENDS.remove(name)


def spec(backend_name: str, **options) -> ModelSpec:
    return ModelSpec(id=f"m-{backend_name}", backend=backend_name, weights="demo-weights", options=options)


def test_the_project_backends_declare_what_was_known_by_name():
    assert {name for name in BACKENDS if batchable(name)} == {"openai", "anthropic", "openai_compatible"}
    assert {name for name in BACKENDS if BACKENDS.get(name).hosted} == {"openai", "anthropic", "openai_compatible"}
    vllm = spec("vllm", tensor_parallel_size=4)
    assert BACKENDS.get("vllm").gpus_for(vllm) == 4 and BACKENDS.get("llama_cpp").gpus_for(spec("llama_cpp")) == 0
    assert missing(spec("openai_compatible", api_key_env=KEY)) == f"needs {KEY}"
    assert missing(spec("openai_compatible")) == "needs a server"


def test_a_registered_backend_is_batched_by_what_it_declares(registered, tmp_path, repo_root):
    assert batchable("demo_hosted") and not batchable("demo_gpu") and not batchable("no_such_backend")
    assert batch_enabled(spec("demo_hosted", batch=True)) and not batch_enabled(spec("demo_gpu", batch=True))
    config = tmp_path / "batch.yaml"
    config.write_text(f"""
study: infilling
sweep: capabilities
data: {repo_root / 'data/infilling/sample.jsonl'}
batch: true
models:
  - {{id: hosted, backend: demo_hosted, weights: demo-weights}}
  - {{id: local, backend: demo_gpu, weights: demo-weights, options: {{shards: 2}}}}
prompt_settings: [L2]
""")
    loaded = load_config(config)
    assert [model.options.get("batch") for model in loaded.models] == [True, None]
    # The Ray executor reserves the GPUs the backend says its model holds.
    hosted_cell, gpu_cell = expand_grid(loaded)
    assert cell_resources(hosted_cell, {}).num_gpus == 0.0 and cell_resources(gpu_cell, {}).num_gpus == 4.0


def test_a_registered_backend_says_what_it_needs_and_how_slow_it_starts(registered, monkeypatch):
    monkeypatch.delenv(KEY, raising=False)
    assert missing(spec("demo_hosted")) == f"needs {KEY}"
    monkeypatch.setenv(KEY, "secret")
    assert missing(spec("demo_hosted")) is None
    assert missing(spec("demo_gpu")) == "needs a download"  # not hosted: its weights must be on this machine
    assert slow_start(spec("demo_gpu")).note == "demo engine: a minute and a half to start"
    assert slow_start(spec("demo_hosted")) is None
    assert missing(spec("no_such_backend")) == "needs the no_such_backend backend"


def test_engine_processes_stop_when_the_model_is_released(registered, tmp_path):
    record = tmp_path / "signal"
    loaded = spec("demo_process", signal_record=str(record))
    server = psutil.Process(get_backend(loaded).server.pid)
    assert server.is_running() and server.status() != psutil.STATUS_ZOMBIE
    wait_until(lambda: record.exists() and record.read_text() == "ready", "the engine to handle SIGTERM")
    release(loaded)  # the backend's close() leaves it running; the registry stops what the load started
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    assert record.read_text() == "SIGTERM"  # SIGTERM was enough: it ended on it, before any SIGKILL


def test_a_failed_load_leaves_no_engine_process(registered):
    before = {child.pid for child in own_children()}
    with pytest.raises(RuntimeError, match="did not start"):
        get_backend(spec("demo_process", fail=True))
    assert {child.pid for child in own_children()} <= before


def test_a_process_in_a_session_of_its_own_is_not_an_engine():
    """A sweep the app launches runs in its own session, to outlive the app: it is never taken for an engine."""
    with started_processes() as started:
        job = subprocess.Popen(SLEEPER, start_new_session=True)
        engine = subprocess.Popen(SLEEPER)
    try:
        assert [process.pid for process in started] == [engine.pid]
        assert job.pid not in {child.pid for child in own_children()} and os.getsid(job.pid) == job.pid
    finally:
        for process in (job, engine):
            process.kill()
            process.wait()


def test_engine_threads_follow_the_cores_and_omp_num_threads(monkeypatch):
    """An engine's thread count is the cores the process may use, capped by OMP_NUM_THREADS where it is set (as torch
    and BLAS read it); a value that is not a positive whole number is ignored."""
    from narrative_eval.backends.base import usable_cores

    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert usable_cores() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert usable_cores() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(cores + 8))
    assert usable_cores() == cores
    for ignored in ("0", "two", ""):
        monkeypatch.setenv("OMP_NUM_THREADS", ignored)
        assert usable_cores() == cores
