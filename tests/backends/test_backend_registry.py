"""Every backend is registered by name, and optional engines are imported only when used."""

from __future__ import annotations

import importlib.util
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
