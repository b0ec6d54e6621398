"""GPTQ and AWQ checkpoints made with gptqmodel, for the transformers backend's 'gptq-4bit' and 'awq-4bit'
quantizations (docs/quantization.md). A GGUF source is first exported to a float32 directory (`export_gguf`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from narrative_eval.backends.torch_quant import QuantizationError, cpu_workers_default, one_line, require_library
from narrative_eval.backends.transformers_backend import export_gguf
from narrative_eval.weights import resolve_weights


def quantize_backend(method: str, device: str) -> Any:
    """The gptqmodel kernel a new checkpoint is validated and packed for (AUTO: gptqmodel decides).

    gptqmodel's default AWQ packing kernel (GEMM) needs CUDA; its pure-torch AWQ kernel
    writes the same 'gemm' checkpoint layout and runs anywhere.
    """
    from gptqmodel import BACKEND

    if method == "awq" and not device.startswith("cuda"):
        return BACKEND.AWQ_TORCH
    return BACKEND.AUTO


def quantize_config(method: str, bits: int, group_size: int):
    from gptqmodel import QuantizeConfig

    if method == "gptq":
        return QuantizeConfig(bits=bits, group_size=group_size)
    if method == "awq":
        from gptqmodel import AWQConfig

        return AWQConfig(bits=bits, group_size=group_size)
    raise QuantizationError(f"unknown quantization method {method!r}; use 'gptq' or 'awq'")


def make_quantized_checkpoint(
    weights: str,
    out_dir: str | Path,
    calibration_texts: Sequence[str],
    method: str = "gptq",
    bits: int = 4,
    group_size: int = 64,
    device: str = "cpu",
    tokenizer_source: str | None = None,
    export_root: str | Path | None = None,
) -> Path:
    """Quantize a model to a GPTQ or AWQ checkpoint with gptqmodel (on CPU: about a minute for 135M).

    `weights` may be a GGUF file, a model directory or 'embedded:<name>'; a GGUF is first
    exported to a float32 directory (see `export_gguf`). `group_size` must divide the
    model's hidden sizes (64 does for SmolLM2's 576). Load the result with quantization
    'gptq-4bit' or 'awq-4bit'.
    """
    label = f"{method}-{bits}bit"
    require_library(f"{method}-4bit", str(weights))
    cpu_workers_default()
    from gptqmodel import GPTQModel

    source = Path(resolve_weights(weights))
    if source.is_file():
        source = export_gguf(str(source), export_root, tokenizer_source)
    config = quantize_config(method, bits, group_size)
    try:
        model = GPTQModel.load(str(source), config, device=device)
        model.quantize(list(calibration_texts), batch_size=1, backend=quantize_backend(method, device))
    except (ValueError, RuntimeError, NotImplementedError) as error:
        raise QuantizationError(f"model {weights!r}: gptqmodel could not make a {label} checkpoint on {device} "
                                f"({one_line(error)}); try device='cuda' or method='gptq'") from error
    model.save(str(out_dir))
    return Path(out_dir)


def make_gptq_checkpoint(weights: str, out_dir: str | Path, calibration_texts: Sequence[str], **options: Any) -> Path:
    """A GPTQ checkpoint (`make_quantized_checkpoint` with method 'gptq')."""
    return make_quantized_checkpoint(weights, out_dir, calibration_texts, method="gptq", **options)
