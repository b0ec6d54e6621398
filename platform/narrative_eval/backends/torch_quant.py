"""Quantization for the transformers backend: load-time configs, GPTQ/AWQ checkpoints, clear errors.

`ModelSpec.quantization` labels and what runs them (see docs/quantization.md):

- 'bnb-nf4' / 'bnb-8bit': bitsandbytes, quantized while loading;
- 'torchao-int8': torchao int8 weight-only, quantized while loading;
- 'gptq-4bit' / 'awq-4bit': a checkpoint directory already quantized by gptqmodel (make one
  with `quantized_checkpoints.make_quantized_checkpoint`), loaded and run by gptqmodel's kernels, which include
  pure-torch CPU kernels for both methods.

Every failure to quantize or load is a `QuantizationError`: one line naming the model and
what to do, so a sweep records it on the cell and goes on.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from narrative_eval.backends.base import usable_cores
from narrative_eval.errors import ModelLoadError
from narrative_eval.weights.loading import directory_config, loading_problems, one_line

QUANTIZATIONS = (None, "bnb-nf4", "bnb-8bit", "gptq-4bit", "awq-4bit", "torchao-int8")
# Labels whose checkpoints are already quantized and load through gptqmodel, by the
# `quant_method` their config.json records.
PREQUANTIZED = {"gptq-4bit": "gptq", "awq-4bit": "awq"}
# The Python package each label needs, for the install hint.
LIBRARIES = {"bnb-nf4": "bitsandbytes", "bnb-8bit": "bitsandbytes", "torchao-int8": "torchao",
             "gptq-4bit": "gptqmodel", "awq-4bit": "gptqmodel"}
INSTALL_HINT = "install the quant extra: pip install 'narrative-eval[quant]' (docs/quantization.md)"


class QuantizationError(RuntimeError):
    """A quantization that cannot run here; the message is one line naming the model and the fix."""


def require_library(quantization: str, model: str) -> None:
    """Raise a QuantizationError when the package a quantization label needs is not installed."""
    library = LIBRARIES.get(quantization)
    if library and importlib.util.find_spec(library) is None:
        raise QuantizationError(f"model {model!r}: quantization {quantization!r} needs {library}, which is not installed; {INSTALL_HINT}")


def quantization_config(quantization: str | None, dtype: Any, model: str = "?") -> Any:
    """The transformers quantization config for a ModelSpec.quantization label (None: load as is)."""
    if quantization is None or quantization.startswith("gguf"):
        return None
    if quantization not in QUANTIZATIONS:
        raise QuantizationError(f"model {model!r}: unknown quantization {quantization!r} for the transformers backend; "
                                f"use one of {[q for q in QUANTIZATIONS if q]}")
    require_library(quantization, model)
    if quantization in ("bnb-nf4", "bnb-8bit"):
        from transformers import BitsAndBytesConfig

        if quantization == "bnb-8bit":
            return BitsAndBytesConfig(load_in_8bit=True)
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype)
    if quantization == "torchao-int8":
        from transformers import TorchAoConfig

        try:
            from torchao.quantization import Int8WeightOnlyConfig
        except ImportError:  # older torchao spells the method by name
            return TorchAoConfig("int8_weight_only")
        return TorchAoConfig(Int8WeightOnlyConfig())
    return None  # a pre-quantized checkpoint's config.json carries its settings


def checkpoint_method(path: str, quantization: str, model: str) -> str:
    """The quantization method a checkpoint directory records, checked against the label asked for."""
    config = Path(path) / "config.json"
    make = f"make one with make_quantized_checkpoint(..., method={PREQUANTIZED[quantization]!r}) (docs/quantization.md)"
    if not config.is_file():
        raise QuantizationError(f"model {model!r}: quantization {quantization!r} loads a quantized checkpoint directory, "
                                f"but {path} is not one; {make}")
    recorded = (json.loads(config.read_text()).get("quantization_config") or {}).get("quant_method")
    if recorded != PREQUANTIZED[quantization]:
        raise QuantizationError(f"model {model!r}: {path} is {'not quantized' if recorded is None else f'a {recorded} checkpoint'}, "
                                f"not {PREQUANTIZED[quantization]}; set quantization to the checkpoint's method or {make}")
    return recorded


def cpu_workers_default() -> None:
    """Size gptqmodel's CPU worker pool by the cores here unless the caller chose (GPTQMODEL_CPU_WORKERS)."""
    # gptqmodel reads this at import; its own default over-subscribes small machines. Its model loader asks the CPU
    # pool for two workers and refuses to start with fewer (seen under OMP_NUM_THREADS=1), so two is the least.
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", str(max(2, usable_cores())))


def load_prequantized(path: str, quantization: str, dtype: Any, device: str, model: str = "?"):
    """A GPTQ/AWQ checkpoint through gptqmodel, which picks the fastest kernel for the device.

    transformers' own GPTQ integration routes through `optimum` to the same gptqmodel
    kernels; loading with gptqmodel directly needs one package less. The returned object is
    the plain transformers model inside gptqmodel's wrapper, so generation is shared.
    """
    require_library(quantization, model)
    method = checkpoint_method(path, quantization, model)
    cpu_workers_default()
    from gptqmodel import GPTQModel

    try:
        wrapped = GPTQModel.load(path, device=device, dtype=dtype)
    except (ValueError, RuntimeError, NotImplementedError) as error:
        raise QuantizationError(
            f"model {model!r}: gptqmodel cannot run this {method} checkpoint on {device} ({one_line(error)}); "
            f"run it on a CUDA device (options.device: cuda) or re-quantize it for {device} with "
            f"make_quantized_checkpoint(..., method={method!r}, device={device!r})") from error
    model_ = wrapped.model
    # gptqmodel reports no missing weights; its model's class is still checked against the one config.json names.
    problems = loading_problems(model_, {}, directory_config(path))
    if problems:
        raise ModelLoadError(f"model {model!r} at {path} did not load whole: {'; '.join(problems)}")
    model_.eval()
    return model_
