"""Loading a transformers model whole, or not at all: every model the platform loads for a metric or a backend comes
through `load_checked`, so no number is ever computed by weights that did not load.

transformers fills a weight it cannot find in the checkpoint with random values and only logs it; a model class
chosen from a string (bert-score picks `T5EncoderModel` for any name containing "t5") loads a checkpoint of another
family as noise the same way. Here either is a `ModelLoadError` naming the model, the path and what was wrong, and
so is a weights file that cannot be read (cut short, missing): the command prints it as one `error:` line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from pickle import UnpicklingError
from typing import Any

from narrative_eval.errors import ModelLoadError

SHOWN_KEYS = 5
"""Weight names quoted in an error (the rest are counted)."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message, with its type (library errors may span many lines)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _listed(keys: Sequence[Any]) -> str:
    names = [str(key) for key in keys]
    more = f" and {len(names) - SHOWN_KEYS} more" if len(names) > SHOWN_KEYS else ""
    return ", ".join(names[:SHOWN_KEYS]) + more


def directory_config(path: str) -> dict[str, Any] | None:
    """The config.json a model directory holds (None for a GGUF file, a hub id or a directory without one)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return None
    try:
        return json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{path}: its config.json cannot be read ({one_line(error)})") from None


def loading_problems(model: Any, info: Mapping[str, Any], config: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with a model `from_pretrained` gave with `output_loading_info=True`: weights missing (newly
    initialised), weights of the wrong shape, load errors, or a class of another model family than `config` (the
    directory's config.json) names. Unexpected weights (a pretraining head the base model has no use for) are no
    problem: nothing is computed with them."""
    problems = []
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        problems.append(f"{len(missing)} weight(s) missing from the checkpoint, which would be newly initialised "
                        f"(random): {_listed(missing)}")
    mismatched = sorted(str(item[0] if isinstance(item, tuple) else item) for item in info.get("mismatched_keys") or ())
    if mismatched:
        problems.append(f"{len(mismatched)} weight(s) of another shape than the model's, which would be newly "
                        f"initialised (random): {_listed(mismatched)}")
    errors = [str(error) for error in info.get("error_msgs") or ()]
    if errors:
        problems.append(f"load errors: {_listed(errors)}")
    if config is not None:
        named = config.get("model_type")
        loaded = getattr(getattr(type(model), "config_class", None), "model_type", None)
        if named and loaded and named != loaded:
            architectures = config.get("architectures") or [named]
            problems.append(f"loaded as {type(model).__name__} (a {loaded} model), but its config.json names "
                            f"{', '.join(architectures)} (a {named} model)")
    return problems


def load_checked(model_class: Any, path: str, *, what: str, quantizing: bool = False, **kwargs: Any) -> Any:
    """`model_class.from_pretrained(path, **kwargs)`, checked whole (`loading_problems`); a ModelLoadError naming
    `what` (the model as the user knows it: 'BERTScore model', "model 'smollm2'"), the path and every problem, when
    it is not, or when its files cannot be read.

    A file cut short shows as an OSError, a safetensors or pickle error, or (a GGUF or torch file read past its end)
    a ValueError or RuntimeError; when `quantizing`, those two are left to the caller, since a quantization that
    cannot run on this machine raises them too."""
    from safetensors import SafetensorError

    unreadable: tuple[type[BaseException], ...] = (OSError, EOFError, UnpicklingError, SafetensorError)
    if not quantizing:
        unreadable += (ValueError, RuntimeError)
    config = directory_config(path)
    where = str(Path(path) / kwargs["gguf_file"]) if kwargs.get("gguf_file") else path
    try:
        model, info = model_class.from_pretrained(path, output_loading_info=True, **kwargs)
    except unreadable as error:
        raise ModelLoadError(f"{what} at {where}: the weights cannot be read ({one_line(error)}); "
                             "restore or re-download the model's files") from error
    problems = loading_problems(model, info, config)
    if problems:
        raise ModelLoadError(f"{what} at {where} did not load whole, so no number is computed with it: "
                             + "; ".join(problems))
    return model
