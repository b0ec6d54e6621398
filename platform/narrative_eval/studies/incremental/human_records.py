"""Human validation of the incremental-delivery study: import and export of the rating files.

Three JSONL formats (docs/formats.md):

- pointwise ratings, one line per (response, rater):
  ``{record_id, rater, craft, structure_coherence, originality, genre_effectiveness, characterization}``,
  each dimension an integer 1-5 or null (N/A); ``record_id`` names a score record;
- pairwise verdicts, one line per (case, rater, order):
  ``{case_id, rater, order, constraint_following, creative_quality}`` (order: one of vocabulary.ORDERS), each verdict one of
  the five LEVELS as the rater saw A and B in that order (in ``reversed`` the primary B is shown as A);
- pairwise cases (optional), ``{case_id, record_a, record_b}`` in the primary order;
- pairwise evidence (what an evidence-first judge recorded before its verdicts), one line per (case, rater, order,
  shown response, requirement): ``{case_id, rater, order, shown_as: "A"|"B", record_id, constraint_id, status,
  quote}``, ``record_id`` naming the response shown as ``shown_as``.

A verdict is encoded as a score of A over B: "A clearly better" = +2 ... "B clearly better" = -2; the
order-restored value of a reversed verdict is its negation. Loading checks every line and raises DataErrors
naming each bad one as file:line (duplicates and unknown ids included), so nothing is computed from a bad file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.jsonl import checked_jsonl
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.incremental.vocabulary import (
    LEVEL_SCORE,
    LEVELS,
    ORDERS,
    PAIRWISE_DIMENSIONS,
    PRIMARY,
    SIDES,
)

POINTWISE_FIELDS: tuple[str, ...] = ("record_id", "rater", *QUALITY_FIELDS)
VERDICT_FIELDS: tuple[str, ...] = ("case_id", "rater", "order", *PAIRWISE_DIMENSIONS)
CASE_FIELDS: tuple[str, ...] = ("case_id", "record_a", "record_b")
EVIDENCE_FIELDS: tuple[str, ...] = ("case_id", "rater", "order", "shown_as", "record_id", "constraint_id", "status",
                                    "quote")


@dataclass(frozen=True)
class PointwiseRating:
    """One rater's 1-5 ratings of one response (None = N/A)."""

    record_id: str
    rater: str
    scores: dict[str, int | None]


@dataclass(frozen=True)
class PairwiseVerdict:
    """One rater's two five-level verdicts on one case, in the order it was shown."""

    case_id: str
    rater: str
    order: str
    verdicts: dict[str, str]

    def score(self, dimension: str) -> int:
        """The verdict as a score of A over B in the order shown (+2 ... -2)."""
        return LEVEL_SCORE[self.verdicts[dimension]]

    def restored(self, dimension: str) -> int:
        """The verdict in the primary order: a reversed verdict negated."""
        return self.score(dimension) if self.order == PRIMARY else -self.score(dimension)


@dataclass(frozen=True)
class PairCase:
    """A pairwise case: its two responses (score-record ids) in the primary order."""

    case_id: str
    record_a: str
    record_b: str


@dataclass(frozen=True)
class EvidenceStatus:
    """One requirement's status in one response, as a judge recorded it in one presentation order."""

    case_id: str
    """The pairwise case."""
    rater: str
    """The judge (rater id '<judge id>/<rubric>')."""
    order: str
    """primary or reversed."""
    shown_as: str
    """A or B: where the response was shown in that order."""
    record_id: str
    """The response (a score-record id)."""
    constraint_id: str
    """The requirement."""
    status: str
    """The rubric's status (satisfied, partial, missing)."""
    quote: str
    """The judge's quote from the response ('' for none)."""


def _field_problems(data: dict[str, Any], fields: tuple[str, ...], names: tuple[str, ...]) -> list[str]:
    """Missing and unknown fields, and `names` that are not non-empty strings."""
    missing = [key for key in fields if key not in data]
    problems = [f"missing field(s): {', '.join(missing)}"] if missing else []
    unknown = sorted(set(data) - set(fields))
    if unknown:
        problems.append(f"unknown field(s): {', '.join(unknown)}")
    for key in names:
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            problems.append(f"{key} must be a non-empty string")
    return problems


def rating_problems(data: dict[str, Any]) -> list[str]:
    """Everything wrong with one pointwise rating line."""
    problems = _field_problems(data, POINTWISE_FIELDS, ("record_id", "rater"))
    for key in QUALITY_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or float(value) != int(value) or not 1 <= value <= 5:
            problems.append(f"{key} {value!r} outside the 1-5 integer scale (or null for N/A)")
    return problems


def verdict_problems(data: dict[str, Any]) -> list[str]:
    """Everything wrong with one pairwise verdict line."""
    problems = _field_problems(data, VERDICT_FIELDS, ("case_id", "rater"))
    if "order" in data and data["order"] not in ORDERS:
        problems.append(f"order {data['order']!r} is not {' or '.join(map(repr, ORDERS))}")
    for key in PAIRWISE_DIMENSIONS:
        if key in data and data[key] not in LEVELS:
            problems.append(f"{key} {data[key]!r} is not one of the five levels ({', '.join(map(repr, LEVELS))})")
    return problems


def case_problems(data: dict[str, Any]) -> list[str]:
    """Everything wrong with one pairwise case line."""
    problems = _field_problems(data, CASE_FIELDS, CASE_FIELDS)
    if not problems and data["record_a"] == data["record_b"]:
        problems.append(f"record_a and record_b are the same response {data['record_a']!r}")
    return problems


def evidence_problems(data: dict[str, Any]) -> list[str]:
    """Everything wrong with one pairwise evidence line."""
    problems = _field_problems(data, EVIDENCE_FIELDS, ("case_id", "rater", "record_id", "constraint_id", "status"))
    if "order" in data and data["order"] not in ORDERS:
        problems.append(f"order {data['order']!r} is not {' or '.join(map(repr, ORDERS))}")
    if "shown_as" in data and data["shown_as"] not in SIDES:
        problems.append(f"shown_as {data['shown_as']!r} is not 'A' or 'B'")
    if "quote" in data and not isinstance(data["quote"], str):
        problems.append("quote must be a string ('' for none)")
    return problems


def _load(
    path: str | Path,
    what: str,
    check: Callable[[dict[str, Any]], list[str]],
    key: Callable[[dict[str, Any]], tuple],
    known: Callable[[dict[str, Any]], list[str]],
) -> list[dict[str, Any]]:
    """The checked lines of one file, with duplicates (same `key`) and unknown ids (`known` lists them) as errors."""
    path = Path(path)
    errors: list[DataError] = []
    first_line: dict[tuple, int] = {}
    kept = []
    for line_no, data in checked_jsonl(path, what, check, errors):
        problems = known(data)
        if key(data) in first_line:
            problems.append(f"duplicate {' / '.join(map(str, key(data)))} (first at line {first_line[key(data)]})")
        if problems:
            errors.extend(DataError(path, line_no, problem) for problem in problems)
            continue
        first_line[key(data)] = line_no
        kept.append(data)
    if errors:
        raise DataErrors(errors)
    return kept


def _unknown(data: dict[str, Any], fields: Iterable[str], ids: Collection[str] | None, what: str) -> list[str]:
    if ids is None:
        return []
    return [f"unknown {what} {data[f]!r} ({f})" for f in fields if data[f] not in ids]


def load_pointwise_ratings(path: str | Path, record_ids: Collection[str] | None = None) -> list[PointwiseRating]:
    """Read pointwise ratings; with `record_ids` (the score records' ids) an unknown record_id is an error."""
    lines = _load(path, "pointwise ratings file", rating_problems, lambda d: (d["record_id"], d["rater"]),
                  lambda d: _unknown(d, ("record_id",), record_ids, "record_id"))
    return [
        PointwiseRating(d["record_id"], d["rater"], {k: None if d[k] is None else int(d[k]) for k in QUALITY_FIELDS})
        for d in lines
    ]


def load_pairwise_verdicts(path: str | Path, case_ids: Collection[str] | None = None) -> list[PairwiseVerdict]:
    """Read pairwise verdicts; with `case_ids` (the cases file's ids) an unknown case_id is an error."""
    lines = _load(path, "pairwise verdicts file", verdict_problems, lambda d: (d["case_id"], d["rater"], d["order"]),
                  lambda d: _unknown(d, ("case_id",), case_ids, "case_id"))
    return [PairwiseVerdict(d["case_id"], d["rater"], d["order"], {k: d[k] for k in PAIRWISE_DIMENSIONS}) for d in lines]


def load_pair_cases(path: str | Path, record_ids: Collection[str] | None = None) -> list[PairCase]:
    """Read pairwise cases; with `record_ids` a record_a or record_b that names no score record is an error."""
    lines = _load(path, "pairwise cases file", case_problems, lambda d: (d["case_id"],),
                  lambda d: _unknown(d, ("record_a", "record_b"), record_ids, "record"))
    return [PairCase(d["case_id"], d["record_a"], d["record_b"]) for d in lines]


def load_pairwise_evidence(path: str | Path, case_ids: Collection[str] | None = None) -> list[EvidenceStatus]:
    """Read pairwise evidence; with `case_ids` (the cases file's ids) an unknown case_id is an error."""
    lines = _load(path, "pairwise evidence file", evidence_problems,
                  lambda d: (d["case_id"], d["rater"], d["order"], d["shown_as"], d["constraint_id"]),
                  lambda d: _unknown(d, ("case_id",), case_ids, "case_id"))
    return [EvidenceStatus(**{k: d[k] for k in EVIDENCE_FIELDS}) for d in lines]


def _save(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def save_pointwise_ratings(ratings: Iterable[PointwiseRating], path: str | Path) -> Path:
    """Write pointwise ratings in the format load_pointwise_ratings reads."""
    return _save(({"record_id": r.record_id, "rater": r.rater, **{k: r.scores.get(k) for k in QUALITY_FIELDS}}
                  for r in ratings), path)


def save_pairwise_verdicts(verdicts: Iterable[PairwiseVerdict], path: str | Path) -> Path:
    """Write pairwise verdicts in the format load_pairwise_verdicts reads."""
    return _save(({"case_id": v.case_id, "rater": v.rater, "order": v.order,
                   **{k: v.verdicts[k] for k in PAIRWISE_DIMENSIONS}} for v in verdicts), path)


def save_pair_cases(cases: Iterable[PairCase], path: str | Path) -> Path:
    """Write pairwise cases in the format load_pair_cases reads."""
    return _save((asdict(case) for case in cases), path)


def save_pairwise_evidence(evidence: Iterable[EvidenceStatus], path: str | Path) -> Path:
    """Write pairwise evidence in the format load_pairwise_evidence reads."""
    return _save((asdict(e) for e in evidence), path)
