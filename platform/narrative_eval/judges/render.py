"""Blinded judge prompts.

Each builder takes exactly the texts a judge may see — the passage or task, the
requirements and the response(s) — as explicit parameters. None accepts a model id,
condition, prompt level or seed, and none takes **kwargs, so such facts cannot reach a
judge even by accident. `render_item` picks the allowed fields out of a larger record
and drops the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from narrative_eval.judges.rubric import Rubric, RubricError, load_rubric
from narrative_eval.prompts.render import fill
from narrative_eval.records import Message


@runtime_checkable
class NamedRequirement(Protocol):
    """A requirement record (the incremental study's Constraint): its id and text."""

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


def _messages(rubric: Rubric, values: Mapping[str, str]) -> list[Message]:
    return [
        Message(role="system", content=fill(rubric.system, values).strip()),
        Message(role="user", content=fill(rubric.user, values).strip()),
    ]


def _task_messages(rubric: str, task: str, requirements: Sequence[Requirement], **responses: str) -> list[Message]:
    """A creative-writing rubric's prompt: the brief, its numbered requirements and the response(s)."""
    values = {"task": task, "requirements": format_requirements(normalize_requirements(requirements)), **responses}
    return _messages(load_rubric(rubric), values)


def render_infilling(problem: str, candidate: str, *, rubric: str = "infilling_narrative") -> list[Message]:
    """Judge prompt for one infill: the passage with its blank and the candidate fill."""
    return _messages(load_rubric(rubric), {"problem": problem, "candidate": candidate})


def render_checklist(
    task: str, requirements: Sequence[Requirement], response: str, *, rubric: str = "creative_checklist"
) -> list[Message]:
    """Judge prompt for requirement adherence: the brief, its numbered requirements, the response."""
    return _task_messages(rubric, task, requirements, response=response)


def render_quality(
    task: str, requirements: Sequence[Requirement], response: str, *, rubric: str = "creative_quality"
) -> list[Message]:
    """Judge prompt for writing quality: the brief, its requirements, the response."""
    return _task_messages(rubric, task, requirements, response=response)


def render_pairwise(
    task: str,
    requirements: Sequence[Requirement],
    response_a: str,
    response_b: str,
    *,
    rubric: str = "pairwise",
) -> list[Message]:
    """Judge prompt for a pairwise preference, responses shown in the order given."""
    return _task_messages(rubric, task, requirements, response_a=response_a, response_b=response_b)


_RENDERERS: dict[str, Callable[..., list[Message]]] = {
    "scores:problem,candidate": render_infilling,
    "checklist:task,requirements,response": render_checklist,
    "scores:task,requirements,response": render_quality,
    "pairwise:task,requirements,response_a,response_b": render_pairwise,
}


def render_item(rubric: Rubric, item: Mapping) -> list[Message]:
    """Build a rubric's prompt from a record, using only the fields the rubric declares as inputs.

    Any other field of the record (model, condition, level, seed, ids...) is ignored, never shown.
    """
    missing = [name for name in rubric.inputs if name not in item]
    if missing:
        raise RubricError(f"rubric {rubric.name!r} needs fields {missing} in every item")
    signature = f"{rubric.kind}:{','.join(rubric.inputs)}"
    allowed = {name: item[name] for name in rubric.inputs}
    renderer = _RENDERERS.get(signature)
    if renderer is None:
        # A rubric with inputs of its own (a plugin study's): its declared inputs fill its slots, nothing else does.
        return _messages(rubric, {name: str(value) for name, value in allowed.items()})
    return renderer(**allowed, rubric=str(rubric.path or rubric.name))
