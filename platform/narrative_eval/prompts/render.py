"""Prompt settings as data files, the prompt-setting registry, and the one {{slot}} filler.

A study registers the settings of its own prompt files from its package (the infilling study's TELeR levels and
reasoning paradigms, the incremental study's system prompts), and a plugin adds its own the same way, with
`register_prompt_file(path)` or `register_system_prompts(path)`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from narrative_eval.registry import Registry

SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class UnfilledSlotError(ValueError):
    """A template was filled without a value (or with None) for one of its slots."""


def slots(template: str) -> set[str]:
    """The {{slot}} names a template uses."""
    return set(SLOT.findall(template))


def fill(template: str, values: dict[str, Any]) -> str:
    """Replace every {{name}} with values[name]; raise if a slot has no value."""
    missing = sorted(slots(template) - set(values))
    if missing:
        raise UnfilledSlotError(f"no value for slot(s) {', '.join(missing)} in template: {template[:80]!r}")
    empty = sorted(name for name in slots(template) if values[name] is None)
    if empty:
        raise UnfilledSlotError(f"slot(s) {', '.join(empty)} given no text in template: {template[:80]!r}")
    # Values are inserted in one pass, so a value that itself contains '{{x}}' is never re-expanded.
    return SLOT.sub(lambda m: str(values[m.group(1)]), template)


@dataclass(frozen=True)
class PromptSettings:
    """A prompt file: system message plus named user templates."""

    path: Path
    """Where the file lives."""
    sha256: str
    """Digest of the file bytes (logged with every run)."""
    system: str
    """Shared system message."""
    settings: dict[str, dict[str, Any]]
    """Setting name -> {kind, title, user}."""
    example_answers: tuple[str, ...]
    """Format examples quoted in prompts (an answer equal to one is a copied example)."""

    def names(self, kind: str | None = None) -> list[str]:
        return [name for name, s in self.settings.items() if kind is None or s.get("kind") == kind]


@cache
def load_prompt_file(path: str | Path) -> PromptSettings:
    path = Path(path)
    raw = path.read_bytes()
    data = yaml.safe_load(raw)
    return PromptSettings(
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        system=data.get("system", ""),
        settings=data["settings"],
        example_answers=tuple(data.get("example_answers", ())),
    )


FILL_TEMPLATE = "fill-the-blank template"
"""What a prompt setting of a settings file is (registry meta `template`): system and user templates of one fill."""
SYSTEM_PROMPT = "system prompt"
"""What a named system prompt is (registry meta `template`): the system message a conversation starts with."""


def register_prompt_file(path: str | Path, registry: Registry | None = None) -> list[str]:
    """Register every setting of a prompt file (target: the loaded file); returns their names."""
    prompts = load_prompt_file(Path(path))
    target = registry or PROMPT_SETTINGS
    for name, setting in prompts.settings.items():
        target.add(name, prompts, origin=str(path), template=FILL_TEMPLATE, kind=setting.get("kind", ""))
    return list(prompts.settings)


def register_system_prompts(path: str | Path, registry: Registry | None = None) -> list[str]:
    """Register the named system prompts of a file of them, name -> text (target: the text)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    target = registry or PROMPT_SETTINGS
    for name, text in data.items():
        target.add(name, str(text or ""), origin=str(path), template=SYSTEM_PROMPT, kind="system")
    return list(data)


PROMPT_SETTINGS: Registry[Any] = Registry("prompt setting")
"""Setting name -> its prompt file (a fill-the-blank setting) or its text (a system prompt)."""
