"""Records of the narrative-infilling study: instances, extraction results and samples."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from narrative_eval.records.base import Frozen, JudgeResult, Message

Position = Literal["opening", "middle", "closing"]


class InfillingInstance(Frozen):
    """One infilling problem in the published benchmark's columns."""

    dataset: str
    """Source collection (wikipedia, cnn_dailymail, rocstories, sind, or a shipped domain name)."""
    ref_id: str
    """Passage identifier within the dataset."""
    source_text: str
    """The full passage (sentences may be joined by ' <eos> ')."""
    problem: str
    """The passage with exactly one blank '______' where the sentences were removed."""
    gold_answer: str
    """The removed sentences."""
    unit: str = "sentence(s)"
    """Unit of the removed span."""
    n: int
    """Number of removed sentences (1-3)."""
    unit_idx: int
    """0-based index of the first removed sentence."""

    @property
    def instance_id(self) -> str:
        return f"{self.dataset}/{self.ref_id}/{self.unit_idx}/{self.n}"


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
