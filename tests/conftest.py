"""Shared fixtures: a throwaway MLflow store and request cache for the whole test session, and the embedded models
loaded once; how the suite runs on several pytest-xdist workers."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

from experiments import sweep
from narrative_eval.quiet import KNOWN_WARNINGS
from tests.shared_sweeps import CONTINUATION, SharedSweep, tracking_store

REPO = Path(__file__).resolve().parents[1]
# No property test fails for the time an example took: Hypothesis's default 200 ms deadline failed a 1 ms example that
# took 480 ms with a second suite running on the same two cores. Timing belongs in bench/. No example database either:
# a failing example is printed with the failure, and nothing is written into the checkout.
settings.register_profile("narrative-eval", deadline=None, database=None)
settings.load_profile("narrative-eval")
# Session fixtures that take minutes: every test that uses one, directly or through another fixture (the app is
# started on the judged sweep), runs on the same xdist worker, so each is built once. Any other test runs on the
# worker its module runs on (module fixtures too).
SHARED_FIXTURES = ("e2e_sweep", "continuation_sweep")
APP_GROUP = "e2e_sweep"
"""The xdist group of every test that uses a shared fixture: both sweeps go into the app's tracking store."""
# One compute thread per process under pytest-xdist: torch, OpenMP, BLAS, tokenizers and llama.cpp (which reads
# OMP_NUM_THREADS through backends.base.usable_cores) each start one. Several workers on few cores then never spread
# one process's threads over cores that others are using (threads that wait on each other at every step, slowed many
# times over), and the kernel moves single-threaded processes to whichever core is free.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"}
LIFTED = pytest.StashKey[dict]()  # the thread limits a vLLM test's setup took away, put back at its teardown
CPU_AT_SETUP = pytest.StashKey[float]()  # the worker's CPU seconds (its own and its reaped children's) at setup
STARTED_AT = pytest.StashKey[float]()  # when the item's setup began (epoch seconds)


def pytest_configure(config):
    """The dependencies' known harmless warnings are filtered (listed once, in narrative_eval.quiet; the summary shows
    any other). Under pytest-xdist the controller sets ONE_THREAD before it starts the workers, so the workers and
    everything they start inherit it before any library reads it. (Pinning each worker to one core did the same for
    thread counts, but two workers shared one core while the other idled: a core was idle a fifth of a clean run.)"""
    for known in KNOWN_WARNINGS:
        config.addinivalue_line("filterwarnings", known.pytest_filter())
    if os.environ.get("PYTEST_XDIST_WORKER") is None and getattr(config.option, "numprocesses", None):
        os.environ.update(ONE_THREAD)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A vLLM engine sizes its threads by the cores it binds: it starts without the one-thread limits. The item's CPU
    time is counted from here (see pytest_runtest_makereport)."""
    item.stash[CPU_AT_SETUP] = cpu_seconds()
    item.stash[STARTED_AT] = time.time()
    if item.get_closest_marker("vllm"):
        item.stash[LIFTED] = {name: os.environ.pop(name) for name in ONE_THREAD if name in os.environ}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    os.environ.update(item.stash.get(LIFTED, {}))


@pytest.fixture(scope="session", autouse=True)
def isolated_stores(tmp_path_factory):
    """Tests never write into the repo's mlflow.db, mlruns/ or request cache. The vLLM engines they start and stop
    (SIGKILL included) leave their IPC sockets in a folder of the session's, removed at its end (a short path: a Unix
    socket's may not exceed 107 bytes); tests/vllm_scratch.py's tests start vLLM without it, as a user would."""
    root = tmp_path_factory.mktemp("stores")
    names = ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT", "NARRATIVE_EVAL_CACHE", "VLLM_RPC_BASE_PATH")
    saved = {k: os.environ.get(k) for k in names}
    sockets = tempfile.mkdtemp(prefix="ne-vllm-")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow.db'}"
    os.environ["NARRATIVE_EVAL_ARTIFACT_ROOT"] = str(root / "artifacts")
    os.environ["NARRATIVE_EVAL_CACHE"] = str(root / "requests.sqlite")
    os.environ["VLLM_RPC_BASE_PATH"] = sockets
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    yield root
    shutil.rmtree(sockets, ignore_errors=True)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def ui_paths(isolated_stores) -> dict[str, Path]:
    root = isolated_stores / "ui"
    paths = {"reports": root / "reports", "jobs": root / "ui_jobs", "annotations": root / "annotations.sqlite"}
    paths["reports"].mkdir(parents=True, exist_ok=True)
    return paths


@pytest.fixture(scope="session")
def app_env(ui_paths) -> dict[str, str]:
    """The app and its sweeps get a tracking store of their own: runs other tests leave in the session's store
    (an incremental-delivery sweep, a newer infilling sweep) must not change what the app shows. The request
    cache stays shared, so replies already generated are reused."""
    root = ui_paths["reports"].parent
    return {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
            "NARRATIVE_EVAL_ARTIFACT_ROOT": str(root / "artifacts")}


@pytest.fixture(scope="session")
def continuation_sweep(app_env, tmp_path_factory) -> SharedSweep:
    """The example continuation study's tiny sweep (tests/shared_sweeps.py), run in process into the app's store."""
    folder = tmp_path_factory.mktemp("continuation")
    config = folder / "continuation.yaml"
    config.write_text(yaml.safe_dump({**CONTINUATION, "report_dir": str(folder / "report")}, sort_keys=False))
    out = io.StringIO()
    with tracking_store(app_env), contextlib.redirect_stdout(out):
        code = sweep.main(["--config", str(config), "--no-progress"])
    assert code == 0, out.getvalue()
    return SharedSweep(CONTINUATION["sweep"], config, out.getvalue())


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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip where torch sees no CUDA device (CI has none; bench/gpu/check.sh runs on a GPU). On
    xdist workers (`--dist loadgroup`) every test gets its group. xdist hands the groups out largest first (by number of
    tests). Handing out the groups that hold a heavy test (engine, server, browser, whole sweep) first and the fast
    tier's short groups last was measured no faster, twice: it evens out when the workers finish (a clean clone's
    three within 16 s instead of 122 s), but three workers on two cores keep both busy until one is left, so that wins
    little, while the heavy tests run beside each other (5 % more CPU; pytest 988 s against 955 s, back to back)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        group_for_xdist(items)
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch

    if not torch.cuda.is_available():
        for item in gpu_tests:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


def group_for_xdist(items: list) -> None:
    """Mark each item with its xdist group: the group its module names (`pytest.mark.xdist_group`, for modules that
    must share a worker), else the shared session fixture it uses, else its module."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        shared = any(name in item.fixturenames for name in SHARED_FIXTURES)
        item.add_marker(pytest.mark.xdist_group(APP_GROUP if shared else item.nodeid.split("::")[0]))


def cpu_seconds() -> float:
    """User and system CPU time of this process and of the child processes it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each item's CPU seconds (setup to teardown, subprocesses included) go into the JUnit file as property `cpu_s`:
    unlike wall time it hardly changes with the machine's load, so bench/test_time.py can say where the work is. Its
    start (`started_at`, epoch seconds) and xdist worker (`worker`) go there too, so it can say how busy each worker
    was and which one finished last."""
    outcome = yield
    if call.when == "teardown" and CPU_AT_SETUP in item.stash:
        properties = outcome.get_result().user_properties
        properties.append(("cpu_s", round(cpu_seconds() - item.stash[CPU_AT_SETUP], 2)))
        properties.append(("started_at", round(item.stash[STARTED_AT], 2)))
        properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))
