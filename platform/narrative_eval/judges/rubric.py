"""Judge rubrics as versioned data files, and the JSON schema of the answer each one expects.

A rubric file (YAML) holds the system and user templates with {{slot}} placeholders, the
dimensions to score, and the version. Its hash (sha256 of the file bytes) is logged with
every judged run, so a changed rubric can never pass for the old one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from narrative_eval.prompts.render import slots
from narrative_eval.registry import Registry, UnknownName

RubricKind = Literal["scores", "checklist", "pairwise"]

EVIDENCE_KEYS: dict[str, str] = {"A": "requirements_a", "B": "requirements_b"}
"""Where an evidence-first pairwise answer gives the requirement statuses of the response shown as A and as B."""


class RubricError(ValueError):
    """A rubric file is malformed, or a template was rendered with missing or unknown slots."""


@dataclass(frozen=True)
class Dimension:
    """One scored dimension of a rubric."""

    key: str
    """JSON key of the score in the judge's answer."""
    label: str
    """Human-readable name used in tables."""
    nullable: bool = False
    """True when the judge may answer null (not applicable)."""


@dataclass(frozen=True)
class Rubric:
    """A loaded rubric file."""

    name: str
    """Rubric name (the file stem)."""
    version: int | str
    """The file's `version:` field; bumped whenever the texts change."""
    hash: str
    """sha256 of the file bytes, first 16 hex digits."""
    kind: RubricKind
    """scores: fixed dimensions on an integer scale; checklist: one entry per requirement; pairwise: A/B verdicts."""
    inputs: tuple[str, ...]
    """The slots a prompt is built from (and nothing else)."""
    system: str
    """System message template."""
    user: str
    """User message template."""
    dimensions: tuple[Dimension, ...] = ()
    """Scored dimensions (scores and pairwise rubrics)."""
    scale: tuple[int, ...] = ()
    """Allowed integer scores (scores rubrics)."""
    item_scores: tuple[float, ...] = ()
    """Allowed per-requirement scores (checklist rubrics)."""
    verdicts: Mapping[str, int] = field(default_factory=dict, hash=False, compare=False)
    """Verdict label -> signed preference for response A (pairwise rubrics)."""
    statuses: tuple[str, ...] = ()
    """Requirement statuses an evidence-first pairwise rubric records for each response before its verdicts."""
    quoted_statuses: tuple[str, ...] = ()
    """The statuses that must come with a non-empty quote from the response."""
    quote_max_chars: int | None = None
    """Longest quote a status may carry (None: no bound); the answer schema bounds decoding to it."""
    facets: tuple[Dimension, ...] = ()
    """Craft facets an evidence-first pairwise rubric names a winner of before its verdicts."""
    facet_labels: tuple[str, ...] = ()
    """The answers a facet allows (A, B, tie)."""
    path: Path | None = field(default=None, compare=False)
    """Where the file was loaded from."""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(d.key for d in self.dimensions)

    @property
    def evidence_first(self) -> bool:
        """A pairwise rubric whose answer gives requirement statuses and facet winners before the verdicts."""
        return bool(self.statuses)

    @property
    def per_requirement(self) -> bool:
        """Whether the answer names every requirement id (checklists and evidence-first pairwise rubrics)."""
        return self.kind == "checklist" or self.evidence_first


def register_rubric(path: str | Path, registry: Registry | None = None) -> str:
    """Register a rubric file under its stem (a study's rubric, or a plugin's); returns the name."""
    path = Path(path)
    (registry or RUBRICS).add(path.stem, path.resolve(), origin=str(path))
    return path.stem


RUBRICS: Registry[Path] = Registry("rubric")
"""Rubric name -> its YAML file: those the studies register from their packages (`register_rubric`), and plugins'."""


def rubric_path(name: str | Path) -> Path:
    """The file behind a rubric name ('infilling_narrative') or an explicit path to a YAML file."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    try:
        return RUBRICS.get(str(name))
    except UnknownName as error:
        raise RubricError(str(error)) from None


def available_rubrics() -> list[str]:
    """Names of the registered rubrics."""
    return sorted(RUBRICS.names())


def rubric_hash(name: str | Path) -> str:
    """sha256 of the rubric file's bytes, truncated to 16 hex digits."""
    return hashlib.sha256(rubric_path(name).read_bytes()).hexdigest()[:16]


def load_rubric(name: str | Path) -> Rubric:
    """Load and check a rubric by name or path (re-read when the file changes)."""
    path = rubric_path(name)
    stat = path.stat()
    return _load(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@cache
def _load(path_text: str, size: int, mtime_ns: int) -> Rubric:
    path = Path(path_text)
    raw = path.read_bytes()
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise RubricError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric file must be a mapping")
    for required in ("name", "version", "kind", "inputs", "system", "user"):
        if required not in data:
            raise RubricError(f"{path}: missing field {required!r}")
    kind = data["kind"]
    if kind not in ("scores", "checklist", "pairwise"):
        raise RubricError(f"{path}: kind must be scores, checklist or pairwise, not {kind!r}")
    dimensions = _dimensions(data.get("dimensions"))
    rubric = Rubric(
        name=str(data["name"]),
        version=data["version"],
        hash=hashlib.sha256(raw).hexdigest()[:16],
        kind=kind,
        inputs=tuple(data["inputs"]),
        system=str(data["system"]),
        user=str(data["user"]),
        dimensions=dimensions,
        scale=tuple(int(v) for v in data.get("scale") or ()),
        item_scores=tuple(float(v) for v in data.get("item_scores") or ()),
        verdicts={str(k): int(v) for k, v in (data.get("verdicts") or {}).items()},
        statuses=tuple(str(v) for v in data.get("statuses") or ()),
        quoted_statuses=tuple(str(v) for v in data.get("quoted_statuses") or ()),
        quote_max_chars=int(data["quote_max_chars"]) if data.get("quote_max_chars") is not None else None,
        facets=_dimensions(data.get("facets")),
        facet_labels=tuple(str(v) for v in data.get("facet_labels") or ()),
        path=path,
    )
    used = slots(rubric.system) | slots(rubric.user)
    if used != set(rubric.inputs):
        raise RubricError(f"{path}: template slots {sorted(used)} differ from declared inputs {list(rubric.inputs)}")
    if kind in ("scores", "pairwise") and not dimensions:
        raise RubricError(f"{path}: a {kind} rubric needs dimensions")
    if kind == "scores" and not rubric.scale:
        raise RubricError(f"{path}: a scores rubric needs a scale")
    if kind == "checklist" and not rubric.item_scores:
        raise RubricError(f"{path}: a checklist rubric needs item_scores")
    if kind == "pairwise" and not rubric.verdicts:
        raise RubricError(f"{path}: a pairwise rubric needs verdicts")
    _check_evidence(rubric, path)
    return rubric


def _dimensions(entries: Any) -> tuple[Dimension, ...]:
    return tuple(
        Dimension(key=d["key"], label=d.get("label", d["key"]), nullable=bool(d.get("nullable", False)))
        for d in entries or ()
    )


def _check_evidence(rubric: Rubric, path: Path) -> None:
    """An evidence-first rubric is a pairwise one with statuses, facets and facet labels together."""
    parts = {"statuses": rubric.statuses, "facets": rubric.facets, "facet_labels": rubric.facet_labels}
    given = [name for name, value in parts.items() if value]
    if not given:
        if rubric.quoted_statuses or rubric.quote_max_chars is not None:
            raise RubricError(f"{path}: quoted_statuses and quote_max_chars go with statuses")
        return
    if rubric.kind != "pairwise":
        raise RubricError(f"{path}: {', '.join(given)} belong to a pairwise rubric, not a {rubric.kind} one")
    missing = [name for name, value in parts.items() if not value]
    if missing:
        raise RubricError(f"{path}: an evidence-first pairwise rubric needs {', '.join(missing)} as well")
    unknown = [s for s in rubric.quoted_statuses if s not in rubric.statuses]
    if unknown:
        raise RubricError(f"{path}: quoted_statuses {unknown} are not among the statuses {list(rubric.statuses)}")


def answer_schema(rubric: Rubric, requirement_ids: Sequence[str] = ()) -> dict[str, Any]:
    """JSON schema of the judge's answer (per task for checklists: exactly the requirement ids)."""
    if rubric.kind == "scores":
        properties = {}
        for dim in rubric.dimensions:
            score = {"type": "integer", "enum": list(rubric.scale)}
            # anyOf rather than a type list: llama.cpp's grammar builder would drop the enum for a type list.
            properties[dim.key] = {"anyOf": [score, {"type": "null"}]} if dim.nullable else score
        return _object(properties)
    if rubric.per_requirement and not requirement_ids:
        raise RubricError(f"a {rubric.name} answer schema needs the requirement ids")
    if rubric.kind == "pairwise":
        labels = list(rubric.verdicts)
        verdicts = {dim.key: {"type": "string", "enum": labels} for dim in rubric.dimensions}
        return _evidence_schema(rubric, requirement_ids, verdicts) if rubric.evidence_first else _object(verdicts)
    item = _object(
        {
            "score": {"type": "number", "enum": [_plain_number(v) for v in rubric.item_scores]},
            # No maxLength: OpenAI's strict mode rejects it; max_new_tokens bounds a rambling reason.
            "reason": {"type": "string"},
        }
    )
    # One shared definition keeps the grammar small when a task has many requirements.
    return {"$defs": {"item": item}, **_object({rid: {"$ref": "#/$defs/item"} for rid in requirement_ids})}


def _evidence_schema(rubric: Rubric, requirement_ids: Sequence[str], verdicts: dict[str, Any]) -> dict[str, Any]:
    """Statuses of A's and B's requirements, then facet winners, then the verdicts: the order the judge writes in."""
    quote: dict[str, Any] = {"type": "string"}
    if rubric.quote_max_chars is not None:
        # A pattern, not maxLength (OpenAI's strict mode refuses maxLength): without a bound a small judge
        # quotes until the token limit. No quotation marks, backslashes or control characters, so the bound
        # means the same on the decoded value and on the JSON text a grammar constrains.
        quote["pattern"] = f"^[^\"\\\\\\u0000-\\u001f]{{0,{rubric.quote_max_chars}}}$"
    status = _object({"status": {"type": "string", "enum": list(rubric.statuses)}, "quote": quote})
    requirements = _object({rid: {"$ref": "#/$defs/status"} for rid in requirement_ids})
    facets = _object({facet.key: {"type": "string", "enum": list(rubric.facet_labels)} for facet in rubric.facets})
    evidence = {key: requirements for key in EVIDENCE_KEYS.values()}
    return {"$defs": {"status": status}, **_object({**evidence, "facets": facets, **verdicts})}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    # Every key required, nothing else allowed: the form strict structured-output modes accept.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _plain_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
