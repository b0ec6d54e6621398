"""Views of a study's runs that the app shows in tabs of their own (`Study.viewers`): what a view reads of a run
and how its parts read; the app lays them out and wires them (ui/conversations.py for a `ConversationView`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Requirement:
    """One requirement of a reply's checklist, with the judge's score of it (1 met, 0.5 partly, 0 missed)."""

    text: str
    score: float | None


@dataclass(frozen=True)
class Checklist:
    """What a judge found of one final reply: each requirement's score and the reply's quality dimensions."""

    judge: str
    """The judge's id."""
    quality: tuple[tuple[str, Any], ...]
    """(dimension label, score or None: not applicable), in the judge's order."""
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True)
class ConversationView:
    """A multi-turn study's conversations: each one's user turns with the model's reply after each, and the final
    replies of each condition side by side with their checklists. Its runs log the table `table`, one row per
    turn: `item_column`, `seed`, `turn` (0-based), `user`, `reply` and `final` (true on a conversation's last turn)."""

    name: str
    """Its tab's id (`tab-<name>` in the page)."""
    prefix: str
    """The prefix of its elements' ids in the page (`<prefix>-sweep`, `<prefix>-finals` ...)."""
    title: str
    """Its tab's title."""
    intro: str
    """What it shows, above it (markdown)."""
    empty: str
    """What it says when the store has no sweep of the study (markdown: how to make one)."""
    table: str
    """The runs' logged conversations table."""
    item_column: str
    """The table's column naming a conversation's item (its task)."""
    item_label: str
    """How the item picker is labelled."""
    setting_label: str
    """How the prompt-setting picker is labelled."""
    default_condition: str | None
    """The condition whose conversation is shown first (where the sweep has it)."""
    checklist: Callable[[str, str, Path], Checklist | None]
    """(run id, item, repository root) -> the judge's checklist of the run's final reply (None: none scored)."""


__all__ = ["Checklist", "ConversationView", "Requirement"]
