"""Quantized torch inference through the transformers backend, on SmolLM2 from the embedded GGUF.

The GGUF is dequantized once per module (export_gguf); GPTQ and AWQ 4-bit checkpoints are
made from it here with gptqmodel on the CPU, then loaded and run by the backend. Without the
`quant` extra these tests skip on a developer's machine; under CI (CI=true) they fail instead,
because CI installs the extra and must run them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from narrative_eval.backends.quantized_checkpoints import make_quantized_checkpoint
from narrative_eval.records import GenerationParams, ModelSpec
from narrative_eval.weights import write_once
from tests.made_models import MADE_MODELS, made_model_key

pytest.importorskip("transformers")
pytest.importorskip("gguf", reason="transformers needs the gguf package to read GGUF files")

SMOLLM = "embedded:smollm2-135m-instruct"
DATA = Path(__file__).parent / "data"
# SmolLM2-135M: 30 decoder layers, each with q/k/v/o and gate/up/down projections.
PROJECTIONS = 30 * 7


def needs(library: str) -> pytest.MarkDecorator:
    """Skip without `library` here; fail without it under CI, which installs the quant extra."""
    missing = importlib.util.find_spec(library) is None
    if missing and os.environ.get("CI"):
        return pytest.mark.usefixtures("_quant_extra_missing_in_ci")
    return pytest.mark.skipif(missing, reason=f"{library} is not installed (optional extra 'quant')")


@pytest.fixture
def _quant_extra_missing_in_ci():
    pytest.fail("CI must install the quant extra (bitsandbytes, gptqmodel, torchao): these tests may not skip there")


def spec(quantization: str | None, weights: str = SMOLLM, **options) -> ModelSpec:
    return ModelSpec(id=f"smollm2-{quantization}", backend="transformers", weights=weights,
                     quantization=quantization, options={"batch_size": 4, **options})


def load(quantization: str | None, weights: str = SMOLLM, **options):
    from narrative_eval.backends.transformers_backend import TransformersBackend

    return TransformersBackend(spec(quantization, weights, **options))


def greedy(backend, conversations, tokens: int = 16):
    return backend.generate(conversations, GenerationParams(temperature=0.0, max_new_tokens=tokens))


def quant_kernels(backend) -> list:
    return [m for m in backend.model.modules() if type(m).__module__.startswith("gptqmodel")]


# The project's modules whose code shapes an export or a checkpoint: editing one makes them again.
MAKERS = ("backends/quantized_checkpoints.py", "backends/transformers_backend.py", "backends/torch_quant.py",
          "weights/convert.py")


@pytest.fixture(scope="module")
def export_root() -> str:
    """Where the GGUF is dequantized to a float32 checkpoint, once for every quantization here (kept between runs)."""
    return str(MADE_MODELS / f"hf-exports-{made_model_key(sources=MAKERS, libraries=('transformers', 'torch'))}")


@pytest.fixture(scope="module")
def calibration() -> list[str]:
    import yaml

    return yaml.safe_load((DATA / "calibration.yaml").read_text())["texts"]


def checkpoint(method: str, calibration, export_root) -> Path:
    """SmolLM2 in 4 bits by `method`, made once with gptqmodel on the CPU (a minute or two) and kept between runs."""
    key = made_model_key(method, "bits=4", "group_size=64", *calibration, sources=MAKERS,
                         libraries=("gptqmodel", "torch", "transformers"))
    return write_once(MADE_MODELS / f"smollm2-{method}-{key}", "config.json", lambda staging: make_quantized_checkpoint(
        SMOLLM, staging, calibration, method=method, bits=4, group_size=64, export_root=export_root))


@pytest.fixture(scope="module")
def gptq_checkpoint(calibration, export_root) -> Path:
    return checkpoint("gptq", calibration, export_root)


@pytest.fixture(scope="module")
def gptq(gptq_checkpoint):
    backend = load("gptq-4bit", str(gptq_checkpoint))
    yield backend
    backend.close()


@pytest.mark.slow
@needs("gptqmodel")
def test_gptq_checkpoint_records_its_method(gptq_checkpoint):
    config = json.loads((gptq_checkpoint / "config.json").read_text())["quantization_config"]
    assert (config["quant_method"], config["bits"], config["group_size"]) == ("gptq", 4, 64)
    assert (gptq_checkpoint / "tokenizer_config.json").exists()


@pytest.mark.slow
@needs("gptqmodel")
def test_gptq_runs_every_projection_in_4bit(gptq):
    import torch

    assert len(quant_kernels(gptq)) == PROJECTIONS, {type(m).__name__ for m in quant_kernels(gptq)}
    # Only the tied embedding / output head stays a plain float layer.
    plain = [name for name, m in gptq.model.named_modules() if type(m) is torch.nn.Linear]
    assert plain == ["lm_head"]


@pytest.mark.slow
@needs("gptqmodel")
def test_gptq_generates_a_batch(gptq, conversations):
    replies = greedy(gptq, conversations)
    assert len(replies) == 3 and all(r.ok and r.text.strip() for r in replies)
    assert all(r.prompt_tokens > 0 and 0 < r.completion_tokens <= 16 for r in replies)
    # Left padding must not change a greedy reply: the shortest prompt alone gives the same text.
    assert greedy(gptq, conversations[1:2])[0].text[:20] == replies[1].text[:20]


@pytest.mark.slow
@needs("gptqmodel")
def test_gptq_seeded_sampling_is_reproducible(gptq, conversations):
    def sample(seed: int) -> list[str]:
        params = GenerationParams(temperature=1.0, max_new_tokens=12, seed=seed)
        return [r.text for r in gptq.generate(conversations[:2], params)]

    first = sample(3)
    assert sample(3) == first and sample(4) != first


@pytest.mark.slow
@needs("gptqmodel")
def test_wrong_method_label_is_a_one_line_error(gptq_checkpoint):
    from narrative_eval.backends.transformers_backend import QuantizationError

    with pytest.raises(QuantizationError) as caught:
        load("awq-4bit", str(gptq_checkpoint))
    message = str(caught.value)
    assert "\n" not in message and "'smollm2-awq-4bit'" in message and "a gptq checkpoint" in message


@needs("gptqmodel")
def test_prequantized_label_on_a_gguf_names_the_fix():
    from narrative_eval.backends.transformers_backend import QuantizationError

    with pytest.raises(QuantizationError, match=r"^model 'smollm2-gptq-4bit': .*make_quantized_checkpoint") as caught:
        load("gptq-4bit")
    assert "\n" not in str(caught.value)


def test_unknown_quantization_names_the_model_and_the_choices():
    from narrative_eval.backends.transformers_backend import QuantizationError

    with pytest.raises(QuantizationError, match=r"^model 'smollm2-int3': unknown quantization 'int3'.*gptq-4bit"):
        load("int3")


@pytest.mark.slow
@needs("gptqmodel")
def test_awq_made_and_run_on_cpu(tmp_path, calibration, export_root, conversations):
    made = checkpoint("awq", calibration, export_root)
    backend = load("awq-4bit", str(made))
    try:
        assert len(quant_kernels(backend)) == PROJECTIONS
        replies = greedy(backend, conversations[:2])
        assert all(r.ok and r.text.strip() and r.completion_tokens > 0 for r in replies)
    finally:
        backend.close()
    # The same checkpoint in a layout only CUDA kernels read (AWQ GEMV-fast) cannot load on CPU.
    cuda_only = tmp_path / "smollm2-awq-gemv-fast"
    shutil.copytree(made, cuda_only)
    for name in ("config.json", "quantize_config.json"):
        relabel(cuda_only / name, "gemv_fast")
    from narrative_eval.backends.transformers_backend import QuantizationError

    with pytest.raises(QuantizationError, match=r"^model 'smollm2-awq-4bit': gptqmodel cannot run this awq checkpoint on cpu") as caught:
        load("awq-4bit", str(cuda_only))
    assert "\n" not in str(caught.value) and "CUDA" in str(caught.value)


def relabel(config_file: Path, layout: str) -> None:
    """Rewrite the packing layout a checkpoint's config records."""
    config = json.loads(config_file.read_text())
    settings = config.get("quantization_config", config)
    for key in ("format", "checkpoint_format", "version"):
        if key in settings:
            settings[key] = layout
    config_file.write_text(json.dumps(config))


@pytest.mark.slow
@needs("torchao")
def test_torchao_int8(conversations, export_root):
    backend = load("torchao-int8", export_root=export_root)
    try:
        kinds = {type(m.weight).__name__ for m in backend.model.modules() if hasattr(m, "weight") and m.weight is not None}
        assert any("Int8" in kind or "Affine" in kind for kind in kinds), kinds
        reply = greedy(backend, conversations[1:2], tokens=12)[0]
        assert reply.ok and reply.text.strip()
    finally:
        backend.close()


@pytest.mark.slow
@needs("bitsandbytes")
def test_bitsandbytes_nf4_on_cpu(conversations, export_root):
    backend = load("bnb-nf4", export_root=export_root)
    try:
        assert "Linear4bit" in {type(module).__name__ for module in backend.model.modules()}
        replies = greedy(backend, conversations[:2])
        assert all(r.ok and r.text.strip() and r.completion_tokens > 0 for r in replies)
    finally:
        backend.close()


def test_cuda_device_without_cuda_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match=r"^model 'smollm2-bnb-nf4': options.device is 'cuda' but torch sees no CUDA device"):
        load("bnb-nf4", device="cuda")
