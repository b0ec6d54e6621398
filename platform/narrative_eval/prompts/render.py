"""Prompt settings as data files, the prompt-setting registry, and the one {{slot}} filler.

Every setting of the packaged prompt files (the infilling study's TELeR levels and reasoning paradigms,
the incremental study's system prompts) is registered under its name; a plugin adds settings with
`register_prompt_file(path)` or `register_system_prompts(path)`. A config's `prompt_file` still
replaces the packaged infilling file as a whole.
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

PROMPTS_DIR = Path(__file__).parent
FILL_TEMPLATES_FILE = "settings.yaml"
"""A shipped prompt folder's fill-the-blank settings (system and user templates per setting)."""
SYSTEM_PROMPTS_FILE = "system_prompts.yaml"
"""A shipped prompt folder's named system prompts."""
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


CREATIVE_SYSTEM_PROMPTS_FILE = PROMPTS_DIR / "creative" / SYSTEM_PROMPTS_FILE

FILL_TEMPLATE = "fill-the-blank template"
"""What a prompt setting of a settings file is (registry meta `template`): system and user templates of one fill."""
SYSTEM_PROMPT = "system prompt"
"""What a named system prompt is (registry meta `template`): the system message of a creative-writing conversation."""


def register_prompt_file(path: str | Path, registry: Registry | None = None) -> list[str]:
    """Register every setting of an infilling prompt file (target: the loaded file); returns their names."""
    prompts = load_prompt_file(Path(path))
    target = registry or PROMPT_SETTINGS
    for name, setting in prompts.settings.items():
        target.add(name, prompts, origin=str(path), template=FILL_TEMPLATE, kind=setting.get("kind", ""))
    return list(prompts.settings)


def register_system_prompts(path: str | Path, registry: Registry | None = None) -> list[str]:
    """Register the named system prompts of an incremental-delivery prompts file (target: the text)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    target = registry or PROMPT_SETTINGS
    for name, text in data.items():
        target.add(name, str(text or ""), origin=str(path), template=SYSTEM_PROMPT, kind="system")
    return list(data)


def _discover(registry: Registry) -> None:
    """Every prompt file shipped in the package's prompt folders, by what the file is (its name)."""
    for path in sorted(PROMPTS_DIR.glob(f"*/{FILL_TEMPLATES_FILE}")):
        register_prompt_file(path, registry)
    for path in sorted(PROMPTS_DIR.glob(f"*/{SYSTEM_PROMPTS_FILE}")):
        register_system_prompts(path, registry)


PROMPT_SETTINGS: Registry[Any] = Registry("prompt setting", discover=_discover)
"""Setting name -> its prompt file (infilling) or its system prompt text (incremental-delivery)."""
