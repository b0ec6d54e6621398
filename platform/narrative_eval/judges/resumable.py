"""The one judging step: every verdict the platform asks a judge for goes through `judge_items`.

A study's scorers on its answers (single-turn and multi-turn cells), the control items of the judge checks and the
incremental study's pairwise judges all declare what is judged — items, each a stable key and what the judge sees
(the rubric's inputs, nothing else) — under one judge and a rubric (an item may name its own, as a multi-turn
study's scorers do), with the digests of the valid judgments they already hold. `judge_items` judges every item
that lacks one in some presentation order (or whose texts, rubric file or judge settings have changed since:
another digest), in batches of the judge backend's batch size, reports each batch to the cell's progress under
its stage's label, calls the caller back after each batch so that it can publish what it has and a stopped run
loses at most one batch, and returns the judgments it made, in item order. A pairwise rubric is judged in both
presentation orders: as declared (response_a shown as A) and swapped; any other rubric once. A judge that repeats
(`JudgeSpec.repeats`) judges each item that many times in each order, each repeat its own cached request: a scores or
checklist verdict is the repeats' mean, a pairwise verdict in one order the one most repeats gave. The judge's backend
is asked for only when something is left to judge, so a rerun with everything judged loads no model; what an
earlier attempt sent comes back from the request cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from narrative_eval.backends import in_batches
from narrative_eval.judges.judge import (FORWARD, REVERSED, GeneratingBackend, combine_repeats, judge_many,
                                        judge_pairwise_orders, repeat_judges)
from narrative_eval.judges.rubric import Rubric, load_rubric
from narrative_eval.records import JudgeResult, JudgeSpec, stable_hash

AS_GIVEN = "as_given"
"""The one presentation order of a scores or checklist rubric."""

Progress = Callable[[list, str, int], Iterable]
"""A progress wrapper as a cell's runtime gives it: (batches, label, total) -> the batches, reported as they go."""


@dataclass(frozen=True)
class JudgedItem:
    """One item of a declared set: its stable key and what the judge is shown."""

    key: str
    """Names the item across runs (a case id, an instance id): judgments are matched to it by this key."""
    shown: Mapping[str, Any] = field(hash=False)
    """The rubric's inputs, in the primary order for a pairwise rubric ({task, requirements, response_a,
    response_b}); nothing else reaches the judge."""
    rubric: str = ""
    """The rubric it is judged under when not the one the call names (a multi-turn study's scorers each have
    theirs); of the same kind, so it is judged in the same presentation orders."""


@dataclass(frozen=True)
class Judgment:
    """One verdict on one item in one presentation order."""

    key: str
    """The item's key."""
    order: str
    """The presentation order it was judged in (one of `presentation_orders`)."""
    digest: str
    """What the verdict depends on (`judgment_digest`): a verdict under another digest is judged again."""
    result: JudgeResult
    """The verdict as shown (a pairwise verdict in a swapped order is not restored), or a recorded failure."""


def json_form(value: Any) -> Any:
    """A JSON form of an item's inputs (requirements may be records), for hashing and telling items apart."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): json_form(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_form(v) for v in value]
    return value


def judgment_digest(shown: Mapping[str, Any], rubric: Rubric, judge: JudgeSpec) -> str:
    """What a judgment depends on: the texts shown, the rubric file and the judge's settings."""
    return stable_hash({"item": json_form(shown), "rubric": rubric.hash, "judge": judge.model_dump(mode="json")})


def presentation_orders(rubric: Rubric, names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The orders an item is judged in under `rubric`, by the caller's names when given: a pairwise rubric's two
    (as declared, swapped; default forward and reversed), any other rubric's one (default as_given)."""
    default = (FORWARD, REVERSED) if rubric.kind == "pairwise" else (AS_GIVEN,)
    if names is None:
        return default
    if len(names) != len(default) or len(set(names)) != len(names):
        raise ValueError(f"rubric {rubric.name!r} is judged in {len(default)} presentation order(s), "
                         f"named {list(names)!r}")
    return tuple(names)


def _judge_batch(backend: GeneratingBackend, judge: JudgeSpec, rubrics: Mapping[str, Rubric],
                 batch: Sequence[tuple[str, JudgedItem]], orders: tuple[str, ...]) -> list[tuple[JudgeResult, ...]]:
    """Each (rubric name, item)'s verdicts, one per order, in the batch's order: the items of one rubric are sent
    together."""
    verdicts: dict[int, tuple[JudgeResult, ...]] = {}
    for name in dict.fromkeys(name for name, _ in batch):
        positions = [index for index, (of, _) in enumerate(batch) if of == name]
        shown = [batch[index][1].shown for index in positions]
        # Every repeat of the batch, one after the other; each output's repeats combined into its verdict, per
        # presentation order (a pair's repeats in one order combined by their majority).
        if rubrics[name].kind == "pairwise":
            repeats = [judge_pairwise_orders(backend, repeat, shown, name) for repeat in repeat_judges(judge)]
            results = [tuple(combine_repeats(by_order, pairwise=True) for by_order in zip(*found, strict=True))
                       for found in zip(*repeats, strict=True)]
        else:
            repeats = [judge_many(backend, repeat, name, shown) for repeat in repeat_judges(judge)]
            results = [(combine_repeats(found),) for found in zip(*repeats, strict=True)]
        verdicts.update(zip(positions, results, strict=True))
    return [verdicts[index] for index in range(len(batch))]


def judge_items(backend: Callable[[], GeneratingBackend], judge: JudgeSpec, rubric: str, items: Sequence[JudgedItem],
                valid: Mapping[tuple[str, str], str] | None = None, orders: Sequence[str] | None = None,
                after_batch: Callable[[list[Judgment]], None] | None = None, progress: Progress | None = None,
                label: str = "") -> list[Judgment]:
    """Judge, with `judge` under `rubric` (or an item's own), every item of `items` that `valid` ((key, order) ->
    the digest of a valid judgment held) does not cover in every presentation order under its current digest; the
    judgments made, by item (in `items`' order) and order. `backend` gives the judge's backend (behind the request
    cache) and is called only when something is left to judge; `after_batch` gets each batch's judgments as soon as
    they are made; `progress` reports each batch under `label` (the cell's judging stage)."""
    names = {item.key: item.rubric or rubric for item in items}
    loaded = {name: load_rubric(name) for name in dict.fromkeys([rubric, *names.values()])}
    orders = presentation_orders(loaded[rubric], orders)
    mixed = [name for name, found in loaded.items() if len(presentation_orders(found)) != len(orders)]
    if mixed:
        raise ValueError(f"rubrics {mixed} are judged in other presentation orders than {rubric!r}: judge them apart")
    valid = valid or {}
    digests = {item.key: judgment_digest(item.shown, loaded[names[item.key]], judge) for item in items}
    todo = [item for item in items if any(valid.get((item.key, order)) != digests[item.key] for order in orders)]
    if not todo:
        if progress is not None and label:
            list(progress([], label, 0))  # the stage is reported done: nothing was left to judge
        return []
    made: list[Judgment] = []
    engine = backend()
    for batch in in_batches(todo, engine, progress, label):
        verdicts = _judge_batch(engine, judge, loaded, [(names[item.key], item) for item in batch], orders)
        judged = [Judgment(item.key, order, digests[item.key], result)
                  for item, results in zip(batch, verdicts, strict=True)
                  for order, result in zip(orders, results, strict=True)]
        made += judged
        if after_batch is not None:
            after_batch(judged)
    return made


__all__ = [
    "AS_GIVEN",
    "JudgedItem",
    "Judgment",
    "Progress",
    "json_form",
    "judge_items",
    "judgment_digest",
    "presentation_orders",
]
