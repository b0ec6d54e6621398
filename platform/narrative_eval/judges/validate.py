"""Turn a judge's raw reply into validated scores, or say exactly why it cannot be used.

The JSON may come bare, in a ```json fence, or inside prose; every JSON object found is
tried in order and the first that validates wins. Validation is pydantic with strict
types: a string '4' is not a score, 6 is out of range, a missing dimension is missing,
and a checklist must answer every requirement id and no other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from narrative_eval.judges.rubric import Rubric

FENCE_PATTERN = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class JudgeReplyError(ValueError):
    """A reply that does not hold a valid answer for its rubric."""


def json_candidates(text: str) -> list[Any]:
    """Every JSON value a reply may carry, most explicit first: whole text, fenced blocks, embedded objects."""
    found: list[Any] = []
    decoder = json.JSONDecoder()
    stripped = text.strip()
    # RecursionError: a reply nesting brackets thousands deep is unusable, not a crash.
    try:
        found.append(json.loads(stripped))
    except (ValueError, RecursionError):
        pass
    for block in FENCE_PATTERN.findall(text):
        try:
            found.append(json.loads(block.strip()))
        except (ValueError, RecursionError):
            pass
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _short(error: ValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "answer"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- answer models


@cache
def _scores_model(rubric: Rubric) -> type[BaseModel]:
    low, high = min(rubric.scale), max(rubric.scale)
    fields: dict[str, Any] = {}
    for dim in rubric.dimensions:
        score = Annotated[int, Field(ge=low, le=high, strict=True)]
        # Nullable dimensions are still required: null must be said, not left out.
        fields[dim.key] = (score | None, ...) if dim.nullable else (score, ...)
    return create_model(f"{rubric.name}_answer", __config__=ConfigDict(extra="ignore"), **fields)


def _checklist_item_model(allowed: tuple[float, ...]) -> type[BaseModel]:
    class ChecklistItem(BaseModel):
        """One requirement's verdict."""

        model_config = ConfigDict(extra="ignore", strict=True)

        score: float
        """0, 0.5 or 1."""
        reason: str
        """Why, in a sentence."""

        @field_validator("score")
        @classmethod
        def _allowed(cls, value: float) -> float:
            if value not in allowed:
                raise ValueError(f"score must be one of {list(allowed)}, got {value}")
            return value

    return ChecklistItem


@cache
def _pairwise_model(rubric: Rubric) -> type[BaseModel]:
    labels = {label.lower(): label for label in rubric.verdicts}

    def canonical(value: Any) -> Any:
        # Accept 'A clearly better' / 'a-clearly-better' for 'A_clearly_better'; anything else fails below.
        if isinstance(value, str):
            key = re.sub(r"[\s\-]+", "_", value.strip()).lower()
            return labels.get(key, value)
        return value

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in rubric.verdicts:
            raise ValueError(f"verdict must be one of {list(rubric.verdicts)}, got {value!r}")
        return value

    validators = {
        "canonical": field_validator(*rubric.keys, mode="before")(lambda cls, v: canonical(v)),
        "check": field_validator(*rubric.keys, mode="after")(lambda cls, v: check(v)),
    }
    fields = {key: (str, ...) for key in rubric.keys}
    return create_model(
        f"{rubric.name}_answer", __config__=ConfigDict(extra="ignore"), __validators__=validators, **fields
    )


# --------------------------------------------------------------------------- validation


def validate_answer(rubric: Rubric, answer: Any, requirement_ids: Sequence[str] = ()) -> tuple[dict, dict]:
    """Validate one parsed JSON answer; return (scores, details) or raise JudgeReplyError."""
    if not isinstance(answer, dict):
        raise JudgeReplyError(f"answer must be a JSON object, got {type(answer).__name__}")
    try:
        if rubric.kind == "scores":
            parsed = _scores_model(rubric).model_validate(answer)
            scores = {key: (None if getattr(parsed, key) is None else float(getattr(parsed, key))) for key in rubric.keys}
            return scores, {}
        if rubric.kind == "pairwise":
            parsed = _pairwise_model(rubric).model_validate(answer)
            verdicts = {key: getattr(parsed, key) for key in rubric.keys}
            scores = {key: float(rubric.verdicts[label]) for key, label in verdicts.items()}
            return scores, {"verdicts": verdicts}
        return _validate_checklist(rubric, answer, requirement_ids)
    except ValidationError as error:
        raise JudgeReplyError(_short(error)) from None


def _validate_checklist(rubric: Rubric, answer: dict, requirement_ids: Sequence[str]) -> tuple[dict, dict]:
    entries = answer
    # Hosted judges sometimes answer as a list of {id, score, reason}; accept that form too.
    listed = answer.get("items") if isinstance(answer.get("items"), list) else None
    if listed is not None:
        entries = {}
        for position, entry in enumerate(listed):
            rid = entry.get("constraint_id", entry.get("id")) if isinstance(entry, dict) else None
            if rid is None:
                raise JudgeReplyError(f"items.{position}: entry without an id")
            if str(rid) in entries:
                raise JudgeReplyError(f"items.{position}: requirement id {rid!r} answered twice")
            entries[str(rid)] = entry
    expected = list(requirement_ids)
    got = list(entries)
    missing = [rid for rid in expected if rid not in entries]
    unknown = [rid for rid in got if rid not in expected]
    if missing or unknown:
        raise JudgeReplyError(
            f"checklist answers {len(got)} items for {len(expected)} requirements"
            + (f"; missing ids {missing}" if missing else "")
            + (f"; unknown ids {unknown}" if unknown else "")
        )
    item_model = _checklist_item_model(rubric.item_scores)
    items = []
    for rid in expected:
        try:
            parsed = item_model.model_validate(entries[rid])
        except ValidationError as error:
            raise JudgeReplyError(f"{rid}: {_short(error)}") from None
        items.append({"constraint_id": rid, "score": float(parsed.score), "reason": parsed.reason})
    adherence = sum(item["score"] for item in items) / len(items)
    return {"adherence": adherence}, {"items": items}


def parse_reply(rubric: Rubric, text: str, requirement_ids: Sequence[str] = ()) -> tuple[dict, dict]:
    """Find and validate the answer in a raw reply; raise JudgeReplyError with the first problem seen."""
    candidates = json_candidates(text)
    if not candidates:
        raise JudgeReplyError("no JSON object found in the reply")
    first_error: JudgeReplyError | None = None
    for candidate in candidates:
        try:
            return validate_answer(rubric, candidate, requirement_ids)
        except JudgeReplyError as error:
            first_error = first_error or error
    assert first_error is not None
    raise first_error
