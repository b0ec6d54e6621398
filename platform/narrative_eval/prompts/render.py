"""The one renderer for prompt files: fill {{slots}}, refuse to send a prompt with a slot left over."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from narrative_eval.records import InfillingInstance, Message

PROMPTS_DIR = Path(__file__).parent
DEFAULT_INFILLING_FILE = PROMPTS_DIR / "infilling" / "settings.yaml"
SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class UnfilledSlotError(ValueError):
    pass


def fill(template: str, values: dict[str, Any]) -> str:
    """Replace every {{name}} with values[name]; raise if a slot has no value."""
    missing = sorted({m.group(1) for m in SLOT.finditer(template)} - set(values))
    if missing:
        raise UnfilledSlotError(f"no value for slot(s) {', '.join(missing)} in template: {template[:80]!r}")
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
def load_prompt_file(path: str | Path = DEFAULT_INFILLING_FILE) -> PromptSettings:
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


def render_infilling(setting: str, instance: InfillingInstance, prompt_file: str | Path | None = None) -> list[Message]:
    """Messages for one instance under one prompt setting (L0-L4 or a reasoning paradigm)."""
    prompts = load_prompt_file(prompt_file or DEFAULT_INFILLING_FILE)
    if setting not in prompts.settings:
        raise ValueError(f"unknown prompt setting {setting!r}; {prompts.path} defines {', '.join(prompts.settings)}")
    user = fill(prompts.settings[setting]["user"], {"problem": instance.problem, "n": instance.n, "unit": instance.unit})
    messages = [Message(role="user", content=user)]
    if prompts.system:
        messages.insert(0, Message(role="system", content=prompts.system))
    return messages
