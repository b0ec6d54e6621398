"""Does batching pay? The same prompts through four engines, tokens per second of each.

    python bench/batching.py [--prompts 200] [--max-new-tokens 64] [--setting L2]
                             [--stages llama_cpp,platform_vllm,bare_vllm,server_vllm] [--concurrency 8]

The prompts are the first `--prompts` instances of data/infilling/benchmark.csv (as `--limit`
picks them, spread over the strata) rendered at `--setting`, one request each, with the seed a
sweep derives for it and the same sampling settings everywhere:

- llama_cpp      the platform's llama_cpp backend (SmolLM2 GGUF) in a sweep cell;
- platform_vllm  the platform's vllm backend (the same SmolLM2, converted) in a sweep cell;
- bare_vllm      vLLM's own `LLM.chat` on the same engine settings, no platform code;
- server_vllm    the platform's openai_compatible backend in a sweep cell, against `vllm serve`
                 with the same engine settings, `--concurrency` requests in flight (and the
                 backend's default chunk, 16 × that, per call).

A sweep stage is timed over the cell's generation loop (the study code, the request cache and the
backend; engine start, scoring and logging left out), with a fresh request cache so every reply is
really generated. Each stage runs in its own process, so engines never share memory or a warm
prefix cache. Nothing else runs beside a stage, so on CPUs every vLLM stage gives the engine's worker
every core (the vllm backend's `cpu_reserved_cores: 0`), as llama.cpp's threads get every core; vLLM's
own default keeps one back for its scheduler, which on 2 idle cores about halved the offline engine's
tokens/s (`--vllm-option cpu_reserved_cores=1` measures it). The last line is the ratios:
`ratios: platform_vllm/bare_vllm=<x> platform_vllm/llama_cpp=<y> server_vllm/llama_cpp=<z>`.
bench/gpu/check.sh runs this same program on a GPU machine (`--weights`, `--vllm-option`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, isolated_stores  # noqa: E402

STAGES = ("llama_cpp", "platform_vllm", "bare_vllm", "server_vllm")
SMOLLM = "embedded:smollm2-135m-instruct"
SERVED = "batching-bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--setting", default="L2", help="prompt setting (TELeR level)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--data", default=str(REPO / "data/infilling/benchmark.csv"))
    parser.add_argument("--weights", default=SMOLLM, help="vLLM weights: embedded:<name>, GGUF file or model directory")
    parser.add_argument("--gguf", default=SMOLLM, help="llama_cpp weights")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight against vllm serve")
    parser.add_argument("--batch-size", type=int, default=256, help="requests per vllm backend call")
    parser.add_argument("--vllm-option", action="append", default=[], metavar="KEY=VALUE",
                        help="engine option (YAML value) for every vLLM stage, e.g. gpu_memory_utilization=0.8")
    parser.add_argument("--stage", help=argparse.SUPPRESS)  # internal: run one stage, print one JSON line
    return parser.parse_args(argv)


def engine_options(args: argparse.Namespace) -> dict:
    """The vLLM engine settings shared by the platform, bare and server stages."""
    import yaml

    # The vllm backend's CPU defaults (see vllm_backend.py), spelled out for the bare and server stages.
    options = {"max_model_len": 4096, "enable_prefix_caching": True}
    if not gpu_present():
        options.update({"enforce_eager": True, "kv_cache_memory_gib": 2, "enable_chunked_prefill": False,
                        "enable_prefix_caching": False, "cpu_reserved_cores": 0})
    for item in args.vllm_option:
        key, _, value = item.partition("=")
        options[key] = yaml.safe_load(value)
    return options


def gpu_present() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def requests(args: argparse.Namespace) -> tuple[list, list]:
    """(conversations, GenerationParams) exactly as a sweep cell with seed 0 sends them."""
    from narrative_eval.data.instances import load_instances
    from narrative_eval.studies.infilling.subset import spread_limit
    from narrative_eval.studies.infilling.prompts import render_infilling
    from narrative_eval.records import GenerationParams, derived_seed

    instances = spread_limit(load_instances(args.data), args.prompts)
    base = GenerationParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    conversations = [render_infilling(args.setting, inst) for inst in instances]
    params = [base.model_copy(update={"seed": derived_seed(0, inst.instance_id)}) for inst in instances]
    return conversations, params


class GenerateTimer:
    """A sweep progress factory that times the cells' generation loops and ignores the rest."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, items, description: str = "", total: int | None = None):
        return self._timed(items) if description.endswith(": generate") else items

    def _timed(self, items):
        start = time.perf_counter()
        yield from items
        self.seconds += time.perf_counter() - start


def sweep_stage(args: argparse.Namespace, model: dict) -> dict:
    """One sweep cell on `model`; tokens and seconds of its generation loop."""
    from narrative_eval import tracking
    from narrative_eval.config import SweepConfig
    from narrative_eval.sweep import run_sweep

    root = isolated_stores("bench-batching-")
    config = SweepConfig(
        study="infilling", sweep=f"batching-{model['id']}", data=args.data, limit=args.prompts, models=[model],
        prompt_settings=[args.setting], seeds=[0], metrics={"names": ["rouge1"]}, report_dir=str(root / "report"),
        generation={"temperature": args.temperature, "max_new_tokens": args.max_new_tokens},
    )
    timer = GenerateTimer()
    outcome = run_sweep(config, progress=timer, write_report=False)
    cell = outcome.cells[0]
    if cell.status != "finished":
        raise RuntimeError(f"cell {cell.status}: {cell.error}")
    run = tracking.sweep_cell_runs("infilling", config.sweep).iloc[0]
    failures = run["metrics.request_failure_rate"] * args.prompts
    return {"tokens": int(run["metrics.completion_tokens"]), "seconds": timer.seconds, "errors": round(failures),
            "generated": outcome.generated}


def bare_vllm(args: argparse.Namespace) -> dict:
    """vLLM's LLM.chat on the whole batch: the engine settings of the other stages, no platform code."""
    from vllm import LLM, SamplingParams

    from narrative_eval.backends.vllm_backend import engine_environment, started_with
    from narrative_eval.weights import hf_directory

    conversations, params = requests(args)
    options = engine_options(args)
    engine_args = {k: v for k, v in options.items() if k not in ("kv_cache_memory_gib", "cpu_reserved_cores")}
    if "kv_cache_memory_gib" in options:
        engine_args["kv_cache_memory_bytes"] = int(options["kv_cache_memory_gib"] * 2**30)
    model = str(hf_directory(args.weights)) if args.weights.startswith("embedded:") or args.weights.endswith(".gguf") else args.weights
    with started_with(engine_environment(options.get("cpu_reserved_cores"))):
        llm = LLM(model=model, **engine_args)
    messages = [[{"role": m.role, "content": m.content} for m in c] for c in conversations]
    sampling = [SamplingParams(temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_new_tokens, seed=p.seed)
                for p in params]
    start = time.perf_counter()
    outputs = llm.chat(messages, sampling_params=sampling, use_tqdm=False)
    seconds = time.perf_counter() - start
    return {"tokens": sum(len(o.outputs[0].token_ids) for o in outputs), "seconds": seconds, "errors": 0}


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """`vllm serve` on a free 127.0.0.1 port with the shared engine settings; waits for /health."""
    from narrative_eval.backends.vllm_backend import engine_environment
    from narrative_eval.weights import hf_directory

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = engine_options(args)
    model = str(hf_directory(args.weights)) if args.weights.startswith("embedded:") or args.weights.endswith(".gguf") else args.weights
    command = [sys.executable, "-m", "narrative_eval.backends.vllm_serve", model, "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", SERVED, "--max-model-len", str(options.pop("max_model_len")), "--disable-log-stats"]
    command.append("--enable-prefix-caching" if options.pop("enable_prefix_caching") else "--no-enable-prefix-caching")
    if options.pop("enforce_eager", False):
        command.append("--enforce-eager")
    if "kv_cache_memory_gib" in options:
        command += ["--kv-cache-memory-bytes", str(int(options.pop("kv_cache_memory_gib") * 2**30))]
    environment = {**os.environ, **engine_environment(options.pop("cpu_reserved_cores", None))}
    for key, value in options.items():
        flag = key.replace("_", "-")
        command += [f"--{flag}" if value else f"--no-{flag}"] if isinstance(value, bool) else [f"--{flag}", str(value)]
    log = open(Path(os.environ["NARRATIVE_EVAL_CACHE"]).parent / "server.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    return process, f"http://127.0.0.1:{port}/v1"
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"vllm serve did not become healthy; see {log.name}")
    except BaseException:  # unhealthy, or stopped while waiting (SIGTERM from a time limit): no server is left behind
        stop(process)
        raise


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not gone within 60 s."""
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_stage(args: argparse.Namespace) -> dict:
    if args.stage == "llama_cpp":
        return sweep_stage(args, {"id": "llama_cpp", "backend": "llama_cpp", "weights": args.gguf})
    if args.stage == "platform_vllm":
        options = {**engine_options(args), "batch_size": args.batch_size}
        return sweep_stage(args, {"id": "platform_vllm", "backend": "vllm", "weights": args.weights, "options": options})
    if args.stage == "bare_vllm":
        return bare_vllm(args)
    isolated_stores("bench-batching-server-")
    process, base_url = start_server(args)
    try:
        options = {"base_url": base_url, "max_concurrency": args.concurrency}  # batch_size: the backend's default
        return sweep_stage(args, {"id": "server_vllm", "backend": "openai_compatible", "weights": SERVED, "options": options})
    finally:
        stop(process)


def run_in_subprocess(stage: str, argv: list[str]) -> dict:
    """One stage in a fresh interpreter; its result is the JSON object on its last stdout line."""
    command = [sys.executable, str(Path(__file__).resolve()), *argv, "--stage", stage]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        stdout, stderr = child.communicate()
    except BaseException:  # stopped ourselves: SIGTERM first, so the stage stops its server before it goes
        stop(child)
        raise
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"stage": stage, "error": f"exit {child.returncode}: {tail}"}
    return json.loads(lines[-1])


# CPU features that move these figures: vLLM's CPU kernels use AVX-512 bf16 and AMX; llama.cpp is built without AMX.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_description() -> str:
    """The CPU's model name and which of CPU_FLAGS it has, from /proc/cpuinfo ('unknown CPU' elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    fields: dict[str, str] = {}
    for line in info.splitlines():  # one block per core; the first core's values stand for all
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model, flags = fields.get("model name", "unknown CPU"), set(fields.get("flags", "").split())
    return f"{model} ({' '.join(f for f in CPU_FLAGS if f in flags) or 'none of ' + '/'.join(CPU_FLAGS)})"


def ratio(rows: dict[str, dict], top: str, bottom: str) -> str:
    a, b = rows.get(top, {}).get("tokens_per_s"), rows.get(bottom, {}).get("tokens_per_s")
    return f"{a / b:.2f}" if a and b else "nan"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    # A time limit's SIGTERM unwinds like an exception, so a stopped stage still stops the server it started
    # (check.sh bounds this program with timeout; a killed stage used to leave `vllm serve` running).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if args.stage:
        started = time.perf_counter()
        row = {"stage": args.stage, **run_stage(args)}
        row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["seconds"] else 0.0
        row["stage_wall_s"] = round(time.perf_counter() - started, 1)
        print(json.dumps(row), flush=True)
        return 0
    stages = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        print(f"error: unknown stage(s) {unknown}; known: {', '.join(STAGES)}", file=sys.stderr)
        return 2
    print(f"# {args.prompts} prompts from {Path(args.data).name} at {args.setting}, {args.max_new_tokens} new tokens, "
          f"temperature {args.temperature}, {os.cpu_count()} CPU threads; vLLM engine options {engine_options(args)}",
          flush=True)
    print(f"# CPU: {cpu_description()}", flush=True)
    rows: dict[str, dict] = {}
    for stage in stages:
        row = run_in_subprocess(stage, argv)
        if "error" in row:
            print(f"{stage:14s} failed: {row['error']}", flush=True)
            continue
        rows[stage] = row
        print(f"{stage:14s} {row['tokens_per_s']:8.1f} tok/s  ({row['tokens']} tokens in {row['seconds']:.1f} s, "
              f"{row['errors']} failed requests; stage wall {row['stage_wall_s']} s)", flush=True)
    print(f"ratios: platform_vllm/bare_vllm={ratio(rows, 'platform_vllm', 'bare_vllm')} "
          f"platform_vllm/llama_cpp={ratio(rows, 'platform_vllm', 'llama_cpp')} "
          f"server_vllm/llama_cpp={ratio(rows, 'server_vllm', 'llama_cpp')}")
    return 0 if len(rows) == len(stages) else 1


if __name__ == "__main__":
    sys.exit(main())
