"""Blinded judge prompts: a rubric's templates filled with the inputs it declares, and nothing else.

`render_item` picks the rubric's declared inputs out of a larger record and drops the rest, so a model id,
condition, prompt level or seed cannot reach a judge even by accident. An input named `requirements` is shown as
one numbered line per requirement (`[id] text`), the ids the judge answers under; every other input as its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from narrative_eval.judges.rubric import Rubric, RubricError
from narrative_eval.prompts.render import fill
from narrative_eval.records import Message


@runtime_checkable
class NamedRequirement(Protocol):
    """A requirement record: its id and text."""

    constraint_id: str
    requirement: str


Requirement = NamedRequirement | Mapping | str
"""A requirement as callers hold it: a record with `constraint_id` and `requirement`, a {constraint_id, requirement}
mapping, or plain text."""


@dataclass(frozen=True)
class RequirementItem:
    """A requirement reduced to what a judge sees."""

    id: str
    """Identifier the judge answers under."""
    text: str
    """The requirement text."""


def normalize_requirements(requirements: Sequence[Requirement]) -> list[RequirementItem]:
    """Turn requirements into (id, text) items; plain strings get ids r1, r2, ... Ids must be unique."""
    items = []
    for index, requirement in enumerate(requirements, start=1):
        if isinstance(requirement, NamedRequirement):
            items.append(RequirementItem(requirement.constraint_id, requirement.requirement))
        elif isinstance(requirement, Mapping):
            rid = requirement.get("constraint_id", requirement.get("id"))
            text = requirement.get("requirement", requirement.get("text"))
            if rid is None or text is None:
                raise RubricError(f"requirement {index} needs constraint_id and requirement: {dict(requirement)!r}")
            items.append(RequirementItem(str(rid), str(text)))
        elif isinstance(requirement, str):
            items.append(RequirementItem(f"r{index}", requirement))
        else:
            raise RubricError(f"requirement {index} has unsupported type {type(requirement).__name__}")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise RubricError(f"requirement ids are not unique: {ids}")
    return items


def format_requirements(items: Sequence[RequirementItem]) -> str:
    """One line per requirement, '[id] text', as every rubric shows them."""
    if not items:
        return "(none)"
    return "\n".join(f"[{item.id}] {item.text}" for item in items)


REQUIREMENTS = "requirements"
"""The rubric input shown as numbered requirement lines."""


def render_item(rubric: Rubric, item: Mapping) -> list[Message]:
    """A rubric's prompt from a record, using only the fields the rubric declares as inputs.

    Any other field of the record (model, condition, level, seed, ids...) is ignored, never shown.
    """
    missing = [name for name in rubric.inputs if name not in item]
    if missing:
        raise RubricError(f"rubric {rubric.name!r} needs fields {missing} in every item")
    values = {name: format_requirements(normalize_requirements(item[name])) if name == REQUIREMENTS else str(item[name])
              for name in rubric.inputs}
    return [Message(role="system", content=fill(rubric.system, values).strip()),
            Message(role="user", content=fill(rubric.user, values).strip())]
