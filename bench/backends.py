"""Tokens per second of each CPU backend on the same prompts and settings.

    python bench/backends.py [--max-new-tokens 60] [--gptq] [--server]

Runs llama_cpp on the embedded SmolLM2 GGUF and transformers on the same model loaded from
the GGUF (bf16), with bitsandbytes NF4 and torchao int8 where installed; `--gptq` also makes a
GPTQ 4-bit checkpoint (about a minute on 2 cores) and runs it; `--server` adds
openai_compatible against llama-cpp-python's server. Greedy decoding, one batch per backend
after a warm-up request; tokens/s = generated tokens / wall seconds of the batch.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from narrative_eval.backends.registry import backend_class
from narrative_eval.records import GenerationParams, Message, ModelSpec
from narrative_eval.weights import resolve_weights

SMOLLM = "embedded:smollm2-135m-instruct"
PROMPTS = Path(__file__).with_name("backends_prompts.yaml")
CALIBRATION = Path(__file__).parents[1] / "tests" / "backends" / "data" / "calibration.yaml"


def conversations() -> list[list[Message]]:
    data = yaml.safe_load(PROMPTS.read_text())
    return [[Message(role="system", content=data["system"]), Message(role="user", content=p)] for p in data["prompts"]]


def measure(spec: ModelSpec, batch: list[list[Message]], params: GenerationParams) -> tuple[float, int, float]:
    """(load seconds, generated tokens, tokens/s) for one backend."""
    start = time.perf_counter()
    backend = backend_class(spec.backend)(spec)
    loaded = time.perf_counter() - start
    try:
        backend.generate(batch[:1], params.model_copy(update={"max_new_tokens": 4}))  # warm-up
        start = time.perf_counter()
        replies = backend.generate(batch, params)
        seconds = time.perf_counter() - start
    finally:
        backend.close()
    failed = [r.error for r in replies if not r.ok]
    if failed:
        raise RuntimeError(f"{spec.id}: {len(failed)} failed requests, first: {failed[0]}")
    tokens = sum(r.completion_tokens for r in replies)
    return loaded, tokens, tokens / seconds


def start_llama_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", resolve_weights(SMOLLM), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "2048", "--n_threads", str(os.cpu_count() or 1)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=2):
                return process, base_url
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise RuntimeError("llama_cpp.server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=60)
    parser.add_argument("--gptq", action="store_true", help="also quantize and run a GPTQ 4-bit checkpoint")
    parser.add_argument("--server", action="store_true", help="also run openai_compatible against llama_cpp.server")
    args = parser.parse_args()
    batch = conversations()
    params = GenerationParams(temperature=0.0, max_new_tokens=args.max_new_tokens, seed=0)
    threads = os.cpu_count() or 1

    specs = [
        ModelSpec(id="llama_cpp gguf-q4_1", backend="llama_cpp", weights=SMOLLM, options={"n_ctx": 2048}),
        ModelSpec(id="transformers bf16 (from gguf)", backend="transformers", weights=SMOLLM, options={"batch_size": len(batch)}),
    ]
    if importlib.util.find_spec("bitsandbytes"):
        specs.append(ModelSpec(id="transformers bnb-nf4", backend="transformers", weights=SMOLLM, quantization="bnb-nf4", options={"batch_size": len(batch)}))
    if importlib.util.find_spec("torchao"):
        specs.append(ModelSpec(id="transformers torchao-int8", backend="transformers", weights=SMOLLM, quantization="torchao-int8", options={"batch_size": len(batch)}))
    workdir = tempfile.TemporaryDirectory(prefix="bench-backends-")
    if args.gptq and importlib.util.find_spec("gptqmodel"):
        from narrative_eval.backends.quantized_checkpoints import make_gptq_checkpoint

        start = time.perf_counter()
        texts = yaml.safe_load(CALIBRATION.read_text())["texts"]
        checkpoint = make_gptq_checkpoint(SMOLLM, Path(workdir.name) / "smollm2-gptq", texts)
        print(f"# GPTQ 4-bit checkpoint made in {time.perf_counter() - start:.1f} s")
        specs.append(ModelSpec(id="transformers gptq-4bit", backend="transformers", weights=str(checkpoint), quantization="gptq-4bit", options={"batch_size": len(batch), "dtype": "float16"}))
    server = None
    if args.server:
        server, base_url = start_llama_server()
        specs.append(ModelSpec(id="openai_compatible (llama_cpp.server)", backend="openai_compatible", weights="smollm2", options={"base_url": base_url, "max_concurrency": 1}))

    print(f"# {len(batch)} prompts, greedy, max_new_tokens={args.max_new_tokens}, {threads} CPU threads")
    print(f"{'backend':40s} {'load s':>8s} {'tokens':>8s} {'tok/s':>8s}")
    try:
        for spec in specs:
            try:
                loaded, tokens, rate = measure(spec, batch, params)
            except Exception as error:  # noqa: BLE001 - one broken engine must not hide the others' numbers
                print(f"{spec.id:40s} failed: {type(error).__name__}: {error}")
                continue
            print(f"{spec.id:40s} {loaded:8.1f} {tokens:8d} {rate:8.1f}", flush=True)
    finally:
        if server is not None:
            server.terminate()
        workdir.cleanup()


if __name__ == "__main__":
    main()
