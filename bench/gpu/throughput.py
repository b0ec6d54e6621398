"""Throughput of one engine on the GPU check's 200 prompts; prints one JSON line.

    python bench/gpu/throughput.py vllm MODEL_DIR [--quantization gptq-4bit]
    python bench/gpu/throughput.py transformers MODEL_DIR [--quantization none|gptq-4bit|awq-4bit|bnb-nf4]

`vllm` builds the platform's vLLM backend once and times, on that same engine, a bare
`LLM.chat` call with equivalent SamplingParams and then the backend's `generate` (prefix
caching off, so the second run gains nothing from the first; check.sh uses it when the sweep
stages of bench/batching.py cannot run); `transformers` times the platform's transformers
backend (bf16 for `--quantization none`). Every run: same prompts, same sampling settings, one seed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from narrative_eval.records import GenerationParams, Message, ModelSpec

PROMPTS = Path(__file__).with_name("prompts.yaml")


def conversations(count: int) -> list[list[Message]]:
    data = yaml.safe_load(PROMPTS.read_text())
    prompts = [task.format(subject=subject) for subject in data["subjects"] for task in data["tasks"]]
    if count > len(prompts):
        raise SystemExit(f"only {len(prompts)} prompts in {PROMPTS}")
    return [[Message(role="system", content=data["system"]), Message(role="user", content=p)] for p in prompts[:count]]


def report(engine: str, tokens: int, seconds: float, **extra) -> None:
    print(json.dumps({"engine": engine, "tokens": tokens, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1), **extra}), flush=True)


def run_vllm(args: argparse.Namespace, batch: list[list[Message]], params: GenerationParams) -> None:
    from narrative_eval.backends.vllm_backend import VllmBackend

    spec = ModelSpec(
        id="gpu-check",
        backend="vllm",
        weights=args.model,
        quantization=quantization_label(args),
        options={
            "tensor_parallel_size": args.tensor_parallel_size,
            "gpu_memory_utilization": 0.85,
            "max_model_len": 2048,
            "engine_args": {"enable_prefix_caching": False},
        },
    )
    start = time.perf_counter()
    backend = VllmBackend(spec)
    print(f"# vLLM engine ready in {time.perf_counter() - start:.0f} s", flush=True)
    backend.generate(batch[:8], params.model_copy(update={"max_new_tokens": 8}))  # warm-up

    messages = [[{"role": m.role, "content": m.content} for m in conversation] for conversation in batch]
    sampling = backend.sampling_params(params)
    start = time.perf_counter()
    outputs = backend.llm.chat(messages, sampling_params=sampling, use_tqdm=False)
    seconds = time.perf_counter() - start
    report("bare vLLM (LLM.chat)", sum(len(o.outputs[0].token_ids) for o in outputs), seconds)

    start = time.perf_counter()
    replies = backend.generate(batch, params)
    seconds = time.perf_counter() - start
    errors = sum(not r.ok for r in replies)
    report("platform vllm backend", sum(r.completion_tokens for r in replies), seconds, errors=errors)


def run_transformers(args: argparse.Namespace, batch: list[list[Message]], params: GenerationParams) -> None:
    import torch

    from narrative_eval.backends.transformers_backend import TransformersBackend

    label = quantization_label(args)
    dtype = "bfloat16" if label is None else "float16"
    spec = ModelSpec(id="gpu-check", backend="transformers", weights=args.model, quantization=label,
                     options={"batch_size": args.batch_size, "dtype": dtype,
                              # cuda; cpu only under check.sh's ALLOW_CPU=1 trial runs
                              "device": "cuda" if torch.cuda.is_available() else "cpu"})
    start = time.perf_counter()
    backend = TransformersBackend(spec)
    print(f"# transformers model ready in {time.perf_counter() - start:.0f} s", flush=True)
    backend.generate(batch[:2], params.model_copy(update={"max_new_tokens": 4}))  # warm-up
    start = time.perf_counter()
    replies = backend.generate(batch, params)
    seconds = time.perf_counter() - start
    engine = f"platform transformers backend ({label or 'bf16'})"
    report(engine, sum(r.completion_tokens for r in replies), seconds, errors=sum(not r.ok for r in replies))


def quantization_label(args: argparse.Namespace) -> str | None:
    return None if args.quantization == "none" else args.quantization


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=("vllm", "transformers"))
    parser.add_argument("model", help="local model directory (plain, or a 4-bit GPTQ/AWQ checkpoint)")
    parser.add_argument("--quantization", default="none", choices=("none", "gptq-4bit", "awq-4bit", "bnb-nf4"))
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=50, help="transformers batch size")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    args = parser.parse_args()
    batch = conversations(args.prompts)
    params = GenerationParams(temperature=0.8, top_p=0.95, max_new_tokens=args.max_new_tokens, seed=1234)
    (run_vllm if args.engine == "vllm" else run_transformers)(args, batch, params)


if __name__ == "__main__":
    main()
