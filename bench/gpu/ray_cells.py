"""Two infilling cells through the `ray` executor on one GPU machine, for bench/gpu/check.sh.

    python bench/gpu/ray_cells.py MODEL_DIR [--quantization gptq-4bit] [--gpus-per-cell 0.5]

Each cell is a Ray task holding a share of the GPU and running the platform's `vllm` backend
(with a matching share of GPU memory), so on a one-GPU machine both cells run side by side.
Everything goes to a throwaway MLflow store and request cache. Prints one JSON line with the
outcome and exits non-zero unless both cells finished with metrics logged.

`--backend llama_cpp --weights embedded:smollm2-135m-instruct --gpus-per-cell 0` runs the same
path on a CPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="model directory (vllm) or weights string (llama_cpp)")
    parser.add_argument("--backend", default="vllm", choices=["vllm", "llama_cpp"])
    parser.add_argument("--quantization", default=None, help="quantization label, e.g. gptq-4bit or awq-4bit")
    parser.add_argument("--gpus-per-cell", type=float, default=0.5, help="GPU share each cell's Ray task holds")
    parser.add_argument("--instances", type=int, default=4, help="instances per cell")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="ray-gpu-cells-"))
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir / 'mlflow.db'}"
    os.environ["NARRATIVE_EVAL_ARTIFACT_ROOT"] = str(workdir / "artifacts")
    os.environ["NARRATIVE_EVAL_CACHE"] = str(workdir / "requests.sqlite")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from narrative_eval import tracking
    from narrative_eval.config import SweepConfig
    from narrative_eval.sweep import run_sweep

    options: dict = {}
    if args.backend == "vllm":
        # Two engines share the GPU: each takes a little under its share of memory.
        options = {"gpu_memory_utilization": round(0.9 * min(args.gpus_per_cell, 1.0), 2), "max_model_len": 4096,
                   "enforce_eager": True}
    config = SweepConfig(
        study="infilling",
        sweep="ray-gpu-cells",
        data=str(REPO / "data/infilling/sample.jsonl"),
        limit=args.instances,
        models=[{"id": "model-under-test", "backend": args.backend, "weights": args.weights,
                 "quantization": args.quantization, "options": options}],
        prompt_settings=["L1", "L2"],
        generation={"temperature": 0.0, "max_new_tokens": args.max_new_tokens},
        executor="ray",
        executor_options={"num_cpus": 1, "num_gpus": args.gpus_per_cell, "max_retries": 0},
        report_dir=str(workdir / "report"),
    )
    started = time.perf_counter()
    outcome = run_sweep(config, write_report=False)
    runs = tracking.sweep_cell_runs("infilling", config.sweep)
    summary = {
        "check": "ray two cells",
        "statuses": [c.status for c in outcome.cells],
        "generated": outcome.generated,
        "rouge1": [float(v) for v in runs.get("metrics.rouge1", [])],
        "seconds": round(time.perf_counter() - started, 1),
        "store": str(workdir),
        "errors": [c.error[-500:] for c in outcome.cells if c.error],
    }
    print(json.dumps(summary))
    ok = summary["statuses"] == ["finished", "finished"] and len(summary["rouge1"]) == 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
