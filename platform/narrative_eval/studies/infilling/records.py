"""Records of the narrative-infilling study: extraction results and samples."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from narrative_eval.records import Frozen, JudgeResult, Message


class ExtractionResult(Frozen):
    """The answer pulled out of a raw reply, and how it was found."""

    answer: str | None
    """The extracted fill, or None when nothing usable was found."""
    status: Literal["tag", "echo", "fallback", "none"]
    """tag: <ANSWER> tags; echo: recovered from a passage echo; fallback: whole reply used; none: nothing extractable."""
    think_removed: bool = False
    """True when reasoning up to </think> was stripped first."""

    @property
    def success(self) -> bool:
        return self.status in ("tag", "echo")


class InfillingSample(BaseModel):
    """One generation of one instance under one seed, with everything scored about it."""

    instance_id: str
    """Instance key (dataset/ref_id/unit_idx/n)."""
    seed: int
    """The cell seed this sample belongs to."""
    messages: list[Message]
    """Messages sent to the model."""
    raw_reply: str
    """The model's reply, verbatim."""
    answer: str | None
    """Extracted fill."""
    extraction_status: str
    """How the answer was found (see ExtractionResult)."""
    gold: str
    """The removed sentences."""
    finish_reason: str = "stop"
    """Engine finish reason."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Generated tokens."""
    seconds: float = 0.0
    """Generation wall time."""
    error: str | None = None
    """Request error after retries, if any."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Automatic metric -> score (absent when no answer was extracted)."""
    judges: dict[str, JudgeResult] = Field(default_factory=dict)
    """Judge id -> verdict."""
