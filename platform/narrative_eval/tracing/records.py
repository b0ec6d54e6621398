"""What a cell writes into MLflow's evaluation records: one trace per generation, with its assessments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SourceKind = Literal["expectation", "code", "llm_judge", "human"]


@dataclass(frozen=True)
class AssessmentRecord:
    """One assessment on a trace: the gold answer (an expectation) or a score (feedback)."""

    name: str
    """Assessment name: 'gold', a metric name, or '<judge>/<dimension>'."""
    value: Any
    """The score or expected value (None for a score that could not be computed)."""
    kind: SourceKind
    """expectation (gold from the data), code (an automatic metric), llm_judge or human."""
    source_id: str
    """Who produced it: the data file, 'narrative_eval', the judge id or the rater."""
    rationale: str | None = None
    """The judge's reason, when its rubric asks for one."""
    error: str | None = None
    """Why the value is missing (an unparsable judge reply, a failed extraction)."""


@dataclass(frozen=True)
class TurnRecord:
    """One turn of a multi-turn generation: a child span of the conversation's trace."""

    user: str
    """What the user said this turn."""
    reply: str
    """What the model replied."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Tokens, finish reason and the like."""


@dataclass(frozen=True)
class TraceRecord:
    """One generation (instance x seed, or a whole conversation) as an MLflow trace."""

    key: str
    """Unique within the cell (e.g. '<instance_id>/seed<k>'): a resumed cell replaces, never duplicates, it."""
    name: str
    """Root span name ('infill', 'conversation')."""
    inputs: Any
    """The messages sent (the root span's inputs)."""
    outputs: Any
    """The raw reply and what was extracted from it (the root span's outputs)."""
    rows: tuple[int, ...]
    """Indices of the rows of the cell's table that this trace covers (they get its trace id)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Model, backend, params, tokens, seconds, extraction status."""
    turns: tuple[TurnRecord, ...] = ()
    """Child spans, one per turn (multi-turn studies)."""
    assessments: tuple[AssessmentRecord, ...] = ()
    """Gold, metric scores and judge dimensions."""
