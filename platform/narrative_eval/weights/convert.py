"""GGUF files converted to Hugging Face format, for engines that need it (vLLM).

`hf_directory` gives a directory converted once from the GGUF file (dequantized to bf16),
keyed by the file's sha256, in the model cache; `python -m narrative_eval.weights` converts
ahead of time.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from narrative_eval.weights.embedded import EMBEDDED, default_chat_format, resolve_weights
from narrative_eval.weights.identity import file_digest
from narrative_eval.weights.loading import load_checked

# Bumped when the conversion below changes what it writes, so old directories are not reused.
CONVERSION_VERSION = 1
# Gemma's turn format (the embedded Gemma GGUF carries no template); a system message opens the
# first user turn, as in Gemma's own template, since Gemma has no system role.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set prefix = messages[0]['content'] + '\\n\\n' -%}{%- set turns = messages[1:] -%}"
    "{%- else -%}{%- set prefix = '' -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- for message in turns -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
CHAT_TEMPLATES = {"gemma": GEMMA_TEMPLATE}
# Tokens that end a turn besides the GGUF's end-of-sequence token, per chat format.
TURN_END_TOKENS = {"gemma": ("<end_of_turn>",)}


class ConversionError(RuntimeError):
    pass


def model_cache_dir() -> Path:
    """Where converted models live: $NARRATIVE_EVAL_MODEL_CACHE or ~/.cache/narrative-eval/hf."""
    configured = os.environ.get("NARRATIVE_EVAL_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "narrative-eval" / "hf"


def gguf_sha256(path: str | Path) -> str:
    """sha256 of a GGUF file (memoised on path, size and mtime), the digest the llama.cpp backend keys on."""
    stat = Path(path).stat()
    return file_digest(str(path), stat.st_size, stat.st_mtime)


def hf_directory(weights: str, *, convert: bool = True) -> Path:
    """A Hugging Face-format directory for 'embedded:<name>' or a GGUF file, converted once.

    The directory is <model cache>/<gguf sha256>; a missing one is converted offline (the
    GGUF is dequantized to bf16) through `write_once`.
    """
    gguf = Path(resolve_weights(weights))
    if gguf.suffix != ".gguf" or not gguf.is_file():
        raise ConversionError(f"{weights}: not a GGUF file ({gguf}); give a model directory or an embedded model")
    target = model_cache_dir() / gguf_sha256(gguf)
    if not convert and not (target / "conversion.json").is_file():
        raise ConversionError(f"{weights}: no converted model at {target}; run `python -m narrative_eval.weights {weights}`")

    def write(staging: Path) -> None:
        _convert(gguf, staging, default_chat_format(weights))
        (staging / "conversion.json").write_text(json.dumps(
            {"source": str(gguf), "gguf_sha256": target.name, "weights": weights, "version": CONVERSION_VERSION}, indent=1))

    return write_once(target, "conversion.json", write)


def write_once(target: Path, marker: str, write: Callable[[Path], None]) -> Path:
    """`target`, made once: `write` fills a temporary directory beside it, renamed into place when complete.

    A directory holding the file `marker` is complete and reused as it is; a crash never leaves a half-written
    one, and of two processes writing at once the first to finish wins (both wrote the same thing).
    """
    if (target / marker).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        write(staging)
        staging.chmod(0o755)  # mkdtemp makes it private; the cache may be shared by a team
        try:
            staging.rename(target)
        except OSError:  # another process finished first
            if not (target / marker).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path, chat_format: str | None) -> None:
    """Dequantize a GGUF into bf16 safetensors plus tokenizer files (transformers, offline); the GGUF loaded whole
    (`load_checked`), so no random weight is written into the converted model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    loaded = load_checked(AutoModelForCausalLM, str(gguf.parent), what="GGUF model", gguf_file=gguf.name,
                          dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it; a fresh
    # model built from the same config without that mark takes the dequantized weights.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(loaded.state_dict())
    if chat_format in CHAT_TEMPLATES and not tokenizer.chat_template:
        tokenizer.chat_template = CHAT_TEMPLATES[chat_format]
    stops = [tokenizer.convert_tokens_to_ids(t) for t in TURN_END_TOKENS.get(chat_format or "", ())]
    eos = [config.eos_token_id] if isinstance(config.eos_token_id, int) else list(config.eos_token_id or [])
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=sorted({*eos, *stops}) or None, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    """`python -m narrative_eval.weights [--path] [WEIGHTS...]`: convert GGUF models for vLLM now.

    With no WEIGHTS, every embedded GGUF model; `--path` prints only the directories (for scripts).
    """
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    only_path = "--path" in args
    names = [a for a in args if a != "--path"] or [f"embedded:{m.name}" for m in EMBEDDED.values() if m.kind == "gguf"]
    for weights in names:
        directory = hf_directory(weights)
        print(directory if only_path else f"{weights}: {directory}")
    return 0
