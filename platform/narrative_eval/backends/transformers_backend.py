"""torch inference through Hugging Face transformers, with quantization.

The model's own chat template renders each conversation; a batch is left-padded and
generated in one `generate` call with a `GenerationConfig`. Weights may be a model
directory, a hub id already in the local cache, or a GGUF file (loaded with `gguf_file=`
and dequantized; the tokenizer comes from the GGUF unless `options.tokenizer` names one).
`ModelSpec.quantization` selects (details in `torch_quant` and docs/quantization.md):

- None or 'gguf-*': plain weights in `options.dtype` (default float32 on CPU, bfloat16 on GPU);
- 'bnb-nf4' / 'bnb-8bit': bitsandbytes through `BitsAndBytesConfig`;
- 'gptq-4bit' / 'awq-4bit': a checkpoint directory quantized by gptqmodel (see
  `quantized_checkpoints.make_quantized_checkpoint`), loaded and run by gptqmodel's kernels (CPU or CUDA);
- 'torchao-int8': torchao int8 weight-only quantization at load.

Other options: `batch_size` (default 8), `n_threads` (torch threads), `device` ('cpu' or
'cuda', default: cuda when available), `max_context` (overrides the model's limit),
`export_root` (where GGUF files are exported for quantized loading; default
$NARRATIVE_EVAL_EXPORTS or .cache/hf-exports).
There is no constrained decoding here: `json_schema` is left to the prompt and the caller's
validation (`supports_json_schema` is False).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from narrative_eval.backends.base import Backend, Conversation, backend, cuda_available
from narrative_eval.backends.torch_quant import (
    PREQUANTIZED,
    QuantizationError,
    load_prequantized,
    one_line,
    quantization_config,
)
from narrative_eval.records import GenerationParams, ModelSpec, Reply
from narrative_eval.weights import load_checked, resolve_weights, weights_identity, write_once

def split_gguf(path: str) -> tuple[str, str | None]:
    """(directory or model id, gguf file name or None) for `from_pretrained`."""
    if path.endswith(".gguf") and Path(path).is_file():
        return str(Path(path).parent), Path(path).name
    return path, None


def load_tokenizer(path: str, tokenizer_source: str | None = None):
    """Tokenizer for weights at `path` (GGUF file or directory), left-padded for batched generation."""
    from transformers import AutoTokenizer

    source, gguf_file = split_gguf(path)
    if tokenizer_source:
        tokenizer = AutoTokenizer.from_pretrained(resolve_weights(tokenizer_source))
    else:
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file) if gguf_file else AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def gguf_dequantize_config() -> Any:
    """`GgufConfig(dequantize=True)` on transformers releases that can keep GGUF blocks packed, else None.

    Packed GGUF weights need the optional `kernels` package and compute in float32; the
    platform always loads GGUF weights dequantized so every release behaves the same.
    """
    try:
        from transformers import GgufConfig
    except ImportError:
        return None
    return GgufConfig(dequantize=True)


def default_export_root() -> Path:
    return Path(os.environ.get("NARRATIVE_EVAL_EXPORTS", Path(".cache") / "hf-exports"))


def export_gguf(path: str, export_root: str | Path | None = None, tokenizer_source: str | None = None) -> Path:
    """A plain (dequantized, float32) transformers checkpoint of a GGUF file, made once and reused.

    transformers refuses a quantization config together with `gguf_file=`, so bitsandbytes,
    torchao and GPTQ start from this export. It lives under `export_root` in a folder named
    by the GGUF's digest and is written to a temporary folder first, so a killed export is
    never mistaken for a finished one (`write_once`).
    """
    digest = weights_identity(path).split(":", 1)[1][:16]

    def write(staging: Path) -> None:
        load_model(path, None, "float32", "cpu").save_pretrained(staging)
        load_tokenizer(path, tokenizer_source).save_pretrained(staging)

    return write_once(Path(export_root or default_export_root()) / f"{Path(path).stem}-{digest}", "config.json", write)


def load_model(
    path: str,
    quantization: str | None = None,
    dtype: str = "bfloat16",
    device: str | None = None,
    export_root: str | Path | None = None,
    model_id: str | None = None,
):
    """A causal LM from a directory, cached hub id or GGUF file, quantized as asked, in eval mode; loaded whole or a
    ModelLoadError (`weights.load_checked`)."""
    import torch
    from transformers import AutoModelForCausalLM

    name = model_id or path
    torch_dtype = getattr(torch, dtype) if dtype != "auto" else "auto"
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"model {name!r}: options.device is {device!r} but torch sees no CUDA device; set options.device: cpu")
    if quantization in PREQUANTIZED:
        return load_prequantized(path, quantization, torch_dtype, device, name)
    config = quantization_config(quantization, torch_dtype, name)
    source, gguf_file = split_gguf(path)
    if gguf_file and config is not None:
        source, gguf_file = str(export_gguf(path, export_root)), None
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
        dequantize = gguf_dequantize_config()
        if dequantize is not None:
            kwargs["quantization_config"] = dequantize
    if config is not None:
        kwargs["quantization_config"] = config
        # Quantized weights are placed at load time; moving them afterwards is not supported.
        kwargs["device_map"] = device
    try:
        model = load_checked(AutoModelForCausalLM, source, what=f"model {name!r}", quantizing=config is not None,
                             **kwargs)
    except (ImportError, ValueError, RuntimeError, NotImplementedError) as error:
        if config is None:
            raise
        raise QuantizationError(f"model {name!r}: {quantization} quantization failed on {device} ({one_line(error)}); "
                                "pick another quantization for this device (docs/quantization.md)") from error
    if "device_map" not in kwargs:
        model = model.to(device)
    model.eval()
    return model


def render_chat(tokenizer: Any, conversation: Conversation) -> str:
    """The prompt text of a conversation under the model's chat template, ready for the reply."""
    messages = [{"role": m.role, "content": m.content} for m in conversation]
    # tokenize=False gives the rendered string in every transformers release (transformers 5
    # returns a BatchEncoding dict by default when tokenizing).
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    positions = [text.find(stop) for stop in stops if stop and stop in text]
    if not positions:
        return text, False
    return text[: min(positions)], True


@backend("transformers")
class TransformersBackend(Backend):
    supports_json_schema = False

    @classmethod
    def device_need(cls, spec: ModelSpec) -> str | None:
        """A CUDA device when the spec asks for one (`options.device: cuda`); its quantizations all have CPU kernels
        (docs/quantization.md)."""
        device = str(spec.options.get("device") or "")
        if device.startswith("cuda") and not cuda_available():
            return f"needs a CUDA GPU (options.device: {device})"
        return None

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        import torch

        options = spec.options
        if options.get("n_threads"):
            torch.set_num_threads(int(options["n_threads"]))
        self.path = resolve_weights(spec.weights)
        self.batch_size = int(options.get("batch_size", 8))
        device = options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        # CPUs without native bf16 (no AVX512-BF16/AMX) emulate it and run several times slower
        # than float32; GPUs want half precision.
        dtype = str(options.get("dtype") or ("bfloat16" if device != "cpu" else "float32"))
        # The model first: a quantization that cannot run here fails before any other work.
        self.model = load_model(self.path, spec.quantization, dtype, device, options.get("export_root"), spec.id)
        self.tokenizer = load_tokenizer(self.path, options.get("tokenizer"))
        self.device = next(self.model.parameters()).device
        config_limit = getattr(self.model.config, "max_position_embeddings", None) or 1 << 30
        self.max_context = int(options.get("max_context", config_limit))
        # generate() is not re-entrant on one model: the app and a sweep may share it.
        self._lock = threading.Lock()

    def identity(self) -> str:
        return weights_identity(self.path, self.spec.options.get("revision"))

    def generation_config(self, params: GenerationParams):
        from transformers import GenerationConfig

        sampling = params.temperature > 0
        config = GenerationConfig(
            max_new_tokens=params.max_new_tokens,
            do_sample=sampling,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id,
        )
        if sampling:
            config.temperature = params.temperature
            config.top_p = params.top_p
            config.top_k = 0  # no hidden top-k cut: temperature and top_p are the whole recipe
        if params.stop:
            config.stop_strings = list(params.stop)
        return config

    def _eos_ids(self, config) -> set[int]:
        eos = config.eos_token_id
        return set(eos if isinstance(eos, list) else [eos]) - {None}

    def _generate_batch(self, prompts: list[str], params: GenerationParams) -> list[Reply]:
        import torch

        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        config = self.generation_config(params)
        if params.seed is not None:
            torch.manual_seed(params.seed)
        start = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(**encoded, generation_config=config, tokenizer=self.tokenizer)
        share = (time.perf_counter() - start) / len(prompts)
        eos_ids = self._eos_ids(config)
        prompt_width = encoded["input_ids"].shape[1]
        replies = []
        for row, mask in zip(output, encoded["attention_mask"]):
            new_tokens = row[prompt_width:].tolist()
            ended = False
            for count, token in enumerate(new_tokens):
                if token in eos_ids:
                    new_tokens, ended = new_tokens[: count + 1], True
                    break
            text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
            text, stopped = _cut_at_stop(text, params.stop)
            finish = "stop" if ended or stopped or len(new_tokens) < params.max_new_tokens else "length"
            replies.append(
                Reply(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=int(mask.sum()),
                    completion_tokens=len(new_tokens),
                    seconds=share,
                )
            )
        return replies

    def generate(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        prompts = [render_chat(self.tokenizer, c) for c in conversations]
        replies: list[Reply | None] = [None] * len(prompts)
        runnable = []
        for index, prompt in enumerate(prompts):
            length = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
            if length + params.max_new_tokens > self.max_context:
                replies[index] = Reply(
                    text="",
                    finish_reason="length",
                    prompt_tokens=length,
                    error=f"prompt of {length} tokens + {params.max_new_tokens} new exceeds the context of {self.max_context}",
                )
            else:
                runnable.append(index)
        with self._lock:
            for start in range(0, len(runnable), self.batch_size):
                chunk = runnable[start : start + self.batch_size]
                for index, reply in zip(chunk, self._generate_batch([prompts[i] for i in chunk], params)):
                    replies[index] = reply
        return [reply for reply in replies if reply is not None]

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        import torch
        from transformers import TextIteratorStreamer

        prompt = render_chat(self.tokenizer, conversation)
        encoded = self.tokenizer([prompt], return_tensors="pt", add_special_tokens=False).to(self.device)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        config = self.generation_config(params)

        def run() -> None:
            with self._lock, torch.inference_mode():
                if params.seed is not None:
                    torch.manual_seed(params.seed)
                self.model.generate(**encoded, generation_config=config, tokenizer=self.tokenizer, streamer=streamer)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        yield from streamer
        worker.join()

    def close(self) -> None:
        import gc

        del self.model
        gc.collect()
