"""Records of the incremental-delivery study: tasks and their checklists, score records (its conversations are the
library's `multi_turn.Conversation`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from narrative_eval.records.base import Frozen
from narrative_eval.records.keys import seeded


class Constraint(Frozen):
    """One atomic requirement of a creative-writing task."""

    constraint_id: str
    """Identifier unique within the task."""
    type: str
    """Kind of requirement (premise, perspective, lexical, ending, ...)."""
    requirement: str
    """The requirement as the judge reads it."""
    introduced_at_shard: int
    """0-based shard where the requirement first appears."""


class WritingTask(Frozen):
    """One creative-writing task with its sharded delivery and checklist."""

    domain: str
    """Genre (fantasy, historical_fiction, mystery, romance, science_fiction, comedy)."""
    item_id: int
    """Number within the genre."""
    title: str
    """Task title."""
    full_instruction: str
    """The complete brief, as delivered in FULL."""
    shards: tuple[str, ...]
    """The brief split into 5-9 user turns, as delivered in SHARDED."""
    constraints: tuple[Constraint, ...] = ()
    """Requirement checklist."""

    @property
    def story_id(self) -> str:
        return f"{self.domain}_{self.item_id:03d}"


class ScoreRecord(BaseModel):
    """One judged final response (the published score-record format)."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    """Unique id of the record."""
    story_id: str
    """Task key."""
    genre: str
    """Task genre."""
    model: str
    """Generator id."""
    condition: str
    """Delivery condition (a name from the condition registry: full, sharded, recap, snowball, ...)."""
    judge: str
    """Judge id."""
    adherence: list[dict[str, Any]]
    """[{constraint_id, score: 0|0.5|1}]."""
    quality: dict[str, int | None]
    """craft, structure_coherence, originality, genre_effectiveness, characterization (1-5 or None)."""

    @staticmethod
    def make_id(model: str, condition: str, story_id: str, seed: int, judge: str) -> str:
        """The record id this platform gives one judge's record of one final reply (published records keep theirs)."""
        return f"{seeded(f'{model}/{condition}/{story_id}', seed)}/{judge}"
