"""The infilling study's items for human rating: each fill of a sweep alone (pointwise), or two runs' fills of the
same blank and seed (pairwise), with the passage they fill, their hidden provenance and the judges' scores."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from narrative_eval.annotations import AnnotationItem, Kind, item_key
from narrative_eval.annotations.items import judge_scores_of, output_source, problem_from_messages
from narrative_eval.lazy import lazy_module
from narrative_eval.records import InfillingInstance

pd = lazy_module("pandas")

Output = tuple[pd.Series, pd.Series]
"""One fill: (its cell run, its generations row)."""


def answered(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a generations table with a fill to rate."""
    if table.empty or "answer" not in table.columns:
        return table
    return table[table["answer"].map(lambda a: isinstance(a, str) and bool(a.strip()))]


def fill_groups(runs: pd.DataFrame, table_of: Callable[[str], pd.DataFrame], kind: Kind) -> list[list[Output]]:
    """Every ratable fill (pointwise) or pair of fills of one blank and seed (pairwise) of a sweep's `runs` (their
    generations tables read by `table_of(run_id)`), each in canonical order: by run id."""
    if runs.empty:
        return []
    by_key: dict[tuple[str, int], list[Output]] = {}
    for _, run in runs.iterrows():
        for _, row in answered(table_of(run["run_id"])).iterrows():
            by_key.setdefault((row["instance_id"], int(row["seed"])), []).append((run, row))
    groups: list[list[Output]] = []
    for outputs in by_key.values():
        if kind == "pointwise":
            groups.extend([[output] for output in outputs])
        else:
            groups.extend([[a, b] for i, a in enumerate(outputs) for b in outputs[i + 1:]])
    return [sorted(group, key=lambda pair: pair[0]["run_id"]) for group in groups]


def fill_item_id(sweep: str, kind: Kind, group: list[Output]) -> str:
    instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
    return item_key(kind, sweep, instance_id, seed, [run["run_id"] for run, _ in group])


def fill_item(study: str, sweep: str, kind: Kind, group: list[Output],
              instances_of: Callable[[str], Mapping[str, InfillingInstance]]) -> AnnotationItem:
    """A group's item: its passage from the data file its runs read (`instances_of(path)`: instance id -> instance),
    else from the prompt sent."""
    instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
    run0, row0 = group[0]
    instance: Any = instances_of(run0.get("params.data_path") or "").get(instance_id)
    context = instance.problem if instance is not None else problem_from_messages(row0.get("messages"))
    return AnnotationItem(
        item_id=fill_item_id(sweep, kind, group), kind=kind, study=study, sweep=sweep, instance_id=instance_id,
        seed=seed, context=context, outputs=tuple(str(row["answer"]) for _, row in group),
        sources=tuple(output_source(run, row) for run, row in group),
        judge_scores=tuple(judge_scores_of(row) for _, row in group))


__all__ = ["Output", "answered", "fill_groups", "fill_item", "fill_item_id"]
