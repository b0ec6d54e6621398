"""Hashing, the frozen base record, chat messages, sampling settings, replies and judge verdicts."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

Role = Literal["system", "user", "assistant"]


def stable_hash(payload: Any, length: int = 16) -> str:
    """Hex digest of a JSON-serialisable payload, independent of key order."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def derived_seed(*parts: Any) -> int:
    """An engine seed derived from a cell seed and what identifies one request, stable across runs
    and independent of which other requests share its batch."""
    return int(stable_hash(list(parts), 8), 16) % (2**31 - 1)


def finite_number(value: Any) -> float | None:
    """The value as a float, or None when it is missing, not a number, NaN or infinite (a score not computed)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def without_defaults(record: BaseModel, dumped: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """`dumped` (a record's model_dump) without the fields `names` while they hold their defaults: a field added to a
    record later leaves the dumps, digests and hashes of the records that do not use it as they were (spec hashes of
    finished cells, request-cache keys, files already written)."""
    fields = type(record).model_fields
    for name in names:
        if name in dumped and getattr(record, name) == fields[name].get_default(call_default_factory=True):
            del dumped[name]
    return dumped


class Frozen(BaseModel):
    """Base for immutable records."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def digest(self, length: int = 16) -> str:
        """Stable hash of this record's content."""
        return stable_hash(self.model_dump(mode="json"), length)


class Message(Frozen):
    """One chat message."""

    role: Role
    """Who speaks: system, user or assistant."""
    content: str
    """The message text."""


class GenerationParams(Frozen):
    """Sampling settings for one request."""

    temperature: float = 0.3
    """Sampling temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 128
    """Upper bound on generated tokens."""
    seed: int | None = None
    """Sampling seed handed to the engine where it accepts one."""
    stop: tuple[str, ...] = ()
    """Strings that end generation."""
    json_schema: dict[str, Any] | None = None
    """When set, the reply must be JSON valid under this schema (constrained decoding where the engine allows)."""
    top_logprobs: int = 0
    """Alternatives per replied token whose log-probabilities the reply returns (0: none; backends that can declare
    `score_logprobs`). A request that asks for them is a different request from one that does not."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_defaults(self, handler(self), ("top_logprobs",))


class TokenLogprob(BaseModel):
    """One replied token with its log-probability and the most probable tokens at its position."""

    model_config = ConfigDict(frozen=True)

    token: str
    """The token's text."""
    logprob: float
    """Its natural log-probability under the engine's distribution at this position."""
    top: dict[str, float] = Field(default_factory=dict)
    """Token text -> log-probability of the most probable tokens at this position (the replied one included)."""


class Reply(BaseModel):
    """What a backend returned for one conversation."""

    text: str
    """The generated text ('' on error)."""
    finish_reason: str = "stop"
    """'stop', 'length' (hit max tokens or context) or 'error'."""
    prompt_tokens: int = 0
    """Tokens in the prompt as counted by the engine."""
    completion_tokens: int = 0
    """Tokens generated."""
    seconds: float = 0.0
    """Wall time of the request as first served (cache hits keep the original figure)."""
    cached: bool = False
    """True when served from the request cache."""
    error: str | None = None
    """Error message when the request failed after retries."""
    logprobs: list[TokenLogprob] | None = None
    """The reply's tokens with their log-probabilities, when the request asked for them (`top_logprobs`); the
    request cache keeps and replays them."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_defaults(self, handler(self), ("logprobs",))

    @property
    def ok(self) -> bool:
        return self.error is None


class Turn(BaseModel):
    """One assistant turn of a conversation: the user message it answers and the reply."""

    index: int
    """0-based user-turn index."""
    final: bool
    """True for the reply that is judged."""
    user: str
    """The user message of this turn."""
    text: str
    """The assistant reply."""
    prompt_tokens: int = 0
    """Prompt tokens of this turn."""
    completion_tokens: int = 0
    """Generated tokens."""
    finish_reason: str = "stop"
    """Engine finish reason."""


class JudgeResult(BaseModel):
    """One judge's verdict on one output: scores, or a recorded failure with the raw replies."""

    judge_id: str
    """The judge's name."""
    rubric: str
    """Rubric name."""
    rubric_hash: str
    """Digest of the rubric file used."""
    ok: bool
    """False when every attempt failed to validate."""
    scores: dict[str, float | None] = Field(default_factory=dict)
    """Dimension -> score (None where the rubric allows N/A)."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Rubric-specific extras (checklist items with reasons, pairwise verdicts)."""
    attempts: int = 1
    """Attempts made."""
    raw_replies: list[str] = Field(default_factory=list)
    """Every raw reply, for audit."""
    error: str | None = None
    """Why the last attempt failed validation."""
    expected_scores: dict[str, float | None] = Field(default_factory=dict)
    """Dimension -> the probability-weighted score (`scoring: expected`: the mean of the allowed scores weighted by
    the judge's token probabilities at the score's position, renormalised over them); None where the position's
    probabilities could not be read. Empty for a judge that samples its scores."""
    repeats: list[dict[str, float | None] | None] = Field(default_factory=list)
    """A judge that judges every output several times (`judge_repeats`): each repeat's scores, in repeat order (None
    for a repeat that failed); `scores` are their mean. Empty for a judge that judges once."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_defaults(self, handler(self), ("expected_scores", "repeats"))

    def mean(self) -> float:
        values = [v for v in self.scores.values() if v is not None]
        return sum(values) / len(values) if values else math.nan
