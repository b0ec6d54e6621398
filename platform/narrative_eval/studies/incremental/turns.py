"""The incremental-delivery study's solver: its system prompts, and its delivery conditions, how a creative-writing
brief is split into user turns.

Each condition is one function `(task, templates) -> user turns`, registered with `@condition(name)`. The study's
own are in `conditions.py`, registered through the project's entry points when any registry is first read; plugins
add theirs the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from narrative_eval.prompts.render import PROMPT_SETTINGS, SYSTEM_PROMPT, fill, register_system_prompts
from narrative_eval.registry import Registry
from narrative_eval.studies.incremental.records import WritingTask

CONDITIONS: Registry[Callable[[WritingTask, "TurnTemplates"], list[str]]] = Registry("condition")
"""Condition name -> function building its user turns; `replanning=True` marks the recap-like ones."""

DEFAULT_SYSTEM_PROMPTS_FILE = Path(__file__).with_name("system_prompts.yaml")
"""Named system prompts ('default' is the published study's), registered as prompt settings."""
register_system_prompts(DEFAULT_SYSTEM_PROMPTS_FILE)

DEFAULT_TURNS_FILE = Path(__file__).with_name("turns.yaml")
"""Templates of the recap and snowball user turns."""


def load_system_prompt(name: str = "default", path: str | Path = DEFAULT_SYSTEM_PROMPTS_FILE) -> str:
    """The system prompt called `name`: a registered one (packaged file or plugin) unless another prompts file
    is given; a path to a .txt/.md file is read as the prompt itself."""
    candidate = Path(name)
    if candidate.suffix in (".txt", ".md") and candidate.is_file():
        return candidate.read_text(encoding="utf-8").strip()
    if Path(path) == DEFAULT_SYSTEM_PROMPTS_FILE:
        entry = PROMPT_SETTINGS.entry(name)
        if entry.meta.get("template") != SYSTEM_PROMPT:
            raise KeyError(f"{name!r} is a {entry.meta.get('template')}, not a {SYSTEM_PROMPT}")
        return entry.target
    prompts = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if name not in prompts:
        raise KeyError(f"unknown system prompt {name!r}; known: {', '.join(prompts)} (or give a .txt/.md file)")
    return str(prompts[name] or "")


def condition(name: str, *, replanning: bool = False):
    """Register a function `(task, templates) -> list of user turns` as a delivery condition."""
    return CONDITIONS(name, replanning=replanning)


@dataclass(frozen=True)
class TurnTemplates:
    """The user-turn templates of the replanning conditions, read from a prompt file."""

    item: str
    """How one shard is listed inside a recap or snowball turn ({{number}}, {{shard}})."""
    recap: str
    """The extra final turn of 'recap' ({{requirements}})."""
    snowball: str
    """A later turn of 'snowball' ({{previous}}, {{current}})."""
    path: str
    """File the templates came from."""
    sha256: str
    """Digest of that file (logged with the run)."""


@cache
def load_turn_templates(path: str | Path = DEFAULT_TURNS_FILE) -> TurnTemplates:
    """Read the recap/snowball templates from a YAML file."""
    raw = Path(path).read_bytes()
    data = yaml.safe_load(raw)
    return TurnTemplates(
        item=data["item"], recap=data["recap"], snowball=data["snowball"], path=str(path), sha256=hashlib.sha256(raw).hexdigest()
    )


def listing(shards: Sequence[str], templates: TurnTemplates) -> str:
    """Shards as a numbered list, each through the templates' item line."""
    return "\n".join(fill(templates.item, {"number": k + 1, "shard": shard}) for k, shard in enumerate(shards))


def conversation_turns(task: WritingTask, name: str, templates: TurnTemplates | None = None) -> list[str]:
    """The user turns a condition sends for a task, in order."""
    return CONDITIONS.get(name)(task, templates or load_turn_templates())


def replanning_conditions() -> tuple[str, ...]:
    """Conditions registered as replanning variants of sharded delivery."""
    return tuple(entry.name for entry in CONDITIONS.entries() if entry.meta.get("replanning"))
