"""Turn a judge's raw reply into validated scores, or say exactly why it cannot be used.

The JSON may come bare, in a ```json fence, or inside prose; every JSON object found is
tried in order and the first that validates wins. Validation is pydantic with strict
types: a string '4' is not a score, 6 is out of range, a missing dimension is missing,
and a checklist must answer every requirement id and no other.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from narrative_eval.judges.rubric import EVIDENCE_KEYS, Rubric
from narrative_eval.records import TokenLogprob

ADHERENCE = "adherence"
"""The one score a checklist verdict holds: the mean of its requirements' scores (`checklist_scores`)."""

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


def _labels_model(name: str, keys: tuple[str, ...], labels: tuple[str, ...], what: str) -> type[BaseModel]:
    """An answer of `keys`, each one of `labels`, written with any case, spaces or hyphens ('A clearly better')."""
    canonical_labels = {_label_key(label): label for label in labels}

    def canonical(value: Any) -> Any:
        return canonical_labels.get(_label_key(value), value) if isinstance(value, str) else value

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in labels:
            raise ValueError(f"{what} must be one of {list(labels)}, got {value!r}")
        return value

    validators = {
        "canonical": field_validator(*keys, mode="before")(lambda cls, v: canonical(v)),
        "check": field_validator(*keys, mode="after")(lambda cls, v: check(v)),
    }
    fields = {key: (str, ...) for key in keys}
    return create_model(name, __config__=ConfigDict(extra="ignore"), __validators__=validators, **fields)


def _label_key(value: str) -> str:
    return re.sub(r"[\s\-]+", "_", value.strip()).lower()


@cache
def _pairwise_model(rubric: Rubric) -> type[BaseModel]:
    return _labels_model(f"{rubric.name}_answer", rubric.keys, tuple(rubric.verdicts), "verdict")


@cache
def _facets_model(rubric: Rubric) -> type[BaseModel]:
    keys = tuple(facet.key for facet in rubric.facets)
    return _labels_model(f"{rubric.name}_facets", keys, rubric.facet_labels, "facet winner")


@cache
def _status_model(rubric: Rubric) -> type[BaseModel]:
    model = _labels_model(f"{rubric.name}_status", ("status",), rubric.statuses, "status")

    class RequirementStatus(model):
        """One requirement's status in one response, with the quote from the response that shows it."""

        model_config = ConfigDict(extra="ignore", strict=True)

        quote: str
        """A short quote from the response ('' allowed only for a status that needs none)."""

        @model_validator(mode="after")
        def _quoted(self) -> RequirementStatus:
            if self.status in rubric.quoted_statuses and not self.quote.strip():
                raise ValueError(f"a {self.status!r} status needs a quote from the response")
            if rubric.quote_max_chars is not None and len(self.quote) > rubric.quote_max_chars:
                raise ValueError(f"quote of {len(self.quote)} characters, over the {rubric.quote_max_chars} allowed")
            return self

    return RequirementStatus


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
            if rubric.evidence_first:
                return scores, {"verdicts": verdicts, **_validate_evidence(rubric, answer, requirement_ids)}
            return scores, {"verdicts": verdicts}
        return _validate_checklist(rubric, answer, requirement_ids)
    except ValidationError as error:
        raise JudgeReplyError(_short(error)) from None


def _by_requirement(entries: Any, requirement_ids: Sequence[str], where: str) -> dict[str, Any]:
    """{requirement id: entry} answering exactly `requirement_ids`, from a mapping or (as hosted judges sometimes
    answer) a list of {constraint_id or id, ...}."""
    if isinstance(entries, list):
        listed, entries = entries, {}
        for position, entry in enumerate(listed):
            rid = entry.get("constraint_id", entry.get("id")) if isinstance(entry, dict) else None
            if rid is None:
                raise JudgeReplyError(f"{where}.{position}: entry without an id")
            if str(rid) in entries:
                raise JudgeReplyError(f"{where}.{position}: requirement id {rid!r} answered twice")
            entries[str(rid)] = entry
    if not isinstance(entries, dict):
        raise JudgeReplyError(f"{where}: expected one entry per requirement id, got {type(entries).__name__}")
    expected = list(requirement_ids)
    got = list(entries)
    missing = [rid for rid in expected if rid not in entries]
    unknown = [rid for rid in got if rid not in expected]
    if missing or unknown:
        raise JudgeReplyError(
            f"{where} answers {len(got)} items for {len(expected)} requirements"
            + (f"; missing ids {missing}" if missing else "")
            + (f"; unknown ids {unknown}" if unknown else "")
        )
    return entries


def _validate_evidence(rubric: Rubric, answer: dict, requirement_ids: Sequence[str]) -> dict[str, Any]:
    """The evidence an evidence-first pairwise answer gives before its verdicts: per shown response ('A', 'B') the
    [{constraint_id, status, quote}] in requirement order, and the facet winners."""
    evidence: dict[str, list[dict[str, str]]] = {}
    for side, key in EVIDENCE_KEYS.items():
        if key not in answer:
            raise JudgeReplyError(f"{key}: missing")
        entries = _by_requirement(answer[key], requirement_ids, key)
        evidence[side] = []
        for rid in requirement_ids:
            try:
                parsed = _status_model(rubric).model_validate(entries[rid])
            except ValidationError as error:
                raise JudgeReplyError(f"{key}.{rid}: {_short(error)}") from None
            evidence[side].append({"constraint_id": rid, "status": parsed.status, "quote": parsed.quote})
    if not isinstance(answer.get("facets"), dict):
        raise JudgeReplyError("facets: expected an object with a winner for each facet")
    try:
        facets = _facets_model(rubric).model_validate(answer["facets"])
    except ValidationError as error:
        raise JudgeReplyError(f"facets.{_short(error)}") from None
    return {"evidence": evidence, "facets": {facet.key: getattr(facets, facet.key) for facet in rubric.facets}}


def _validate_checklist(rubric: Rubric, answer: dict, requirement_ids: Sequence[str]) -> tuple[dict, dict]:
    # Hosted judges sometimes answer as a list of {id, score, reason} under 'items'; accept that form too.
    listed = answer.get("items") if isinstance(answer.get("items"), list) else None
    entries = _by_requirement(listed if listed is not None else answer, requirement_ids,
                              "items" if listed is not None else "checklist")
    expected = list(requirement_ids)
    item_model = _checklist_item_model(rubric.item_scores)
    items = []
    for rid in expected:
        try:
            parsed = item_model.model_validate(entries[rid])
        except ValidationError as error:
            raise JudgeReplyError(f"{rid}: {_short(error)}") from None
        items.append({"constraint_id": rid, "score": float(parsed.score), "reason": parsed.reason})
    return checklist_scores(items), {"items": items}


def checklist_scores(items: Sequence[dict]) -> dict[str, float]:
    """A checklist verdict's scores from its requirements' (`{"constraint_id", "score", ...}`, one or more): their
    mean as its ADHERENCE."""
    return {ADHERENCE: sum(item["score"] for item in items) / len(items)}


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


# --------------------------------------------------------------------------- probability-weighted scores


def _score_token(tokens: Sequence[TokenLogprob], key: str) -> tuple[int, str, str] | None:
    """(index, text before the score, text after it) of the token that holds dimension `key`'s score in the reply the
    tokens spell, or None when the reply names no score for it or the score spans several tokens."""
    text = "".join(token.token for token in tokens)
    match = re.search(rf'"{re.escape(key)}"\s*:\s*(-?\d+)', text)
    if match is None:
        return None
    start = 0
    for index, token in enumerate(tokens):
        end = start + len(token.token)
        if start <= match.start(1) < end:
            if match.end(1) > end:
                return None
            return index, token.token[: match.start(1) - start], token.token[match.end(1) - start :]
        start = end
    return None


def expected_scores(rubric: Rubric, tokens: Sequence[TokenLogprob]) -> dict[str, float | None]:
    """Each dimension's probability-weighted score (G-Eval, Liu et al. 2023): at the position of its score in the
    reply, the probabilities of the tokens that spell an allowed score (with the same text around it in the token,
    e.g. ' 4' where the reply has ' 3'), renormalised over them, weight the scores. None for a dimension whose score
    the reply's tokens do not hold in one token. The alternatives are the engine's most probable `top_logprobs`
    tokens, so a score less probable than all of them counts as 0."""
    allowed = {str(score): score for score in rubric.scale}
    found: dict[str, float | None] = {}
    for key in rubric.keys:
        position = _score_token(tokens, key)
        if position is None:
            found[key] = None
            continue
        index, before, after = position
        mass: dict[int, float] = {}
        for text, logprob in tokens[index].top.items():
            if not (text.startswith(before) and text.endswith(after) and len(text) >= len(before) + len(after)):
                continue
            score = allowed.get(text[len(before) : len(text) - len(after)].strip())
            if score is not None:
                mass[score] = mass.get(score, 0.0) + math.exp(logprob)
        total = sum(mass.values())
        found[key] = sum(score * p for score, p in mass.items()) / total if total > 0 else None
    return found
