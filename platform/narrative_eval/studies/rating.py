"""Any single-turn study's outputs as items for people to rate, read from its declaration: what its judge sees beside
the answer (the inputs its `judge_sees` names that are not the answer, under the study's labels) and the dimensions
of its rubric, one pointwise item per stored output of a sweep's cell runs, with its hidden provenance and the
judges' scores. No study writes code for it; the infilling study keeps its own items (its passage with the blank
filled, and pairs of fills: studies.infilling.annotation), whose ids these share."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from narrative_eval.annotations import AnnotationItem, item_key
from narrative_eval.annotations.items import judge_scores_of, output_source
from narrative_eval.evaluation import Answer, Item, SingleTurnStudy, answer_inputs, shown_to_judge
from narrative_eval.judges import load_rubric
from narrative_eval.lazy import lazy_module
from narrative_eval.reports.labels import label

pd = lazy_module("pandas")

Output = tuple[pd.Series, pd.Series]
"""One stored output: (its cell run, its generations row)."""

KIND = "pointwise"
"""The kind of every item: one output, one 1-5 rating per dimension."""


def context_inputs(study: SingleTurnStudy) -> list[tuple[str, str]]:
    """(rubric input, label) of what the study's judge sees beside the answer, in its declaration's order."""
    answers = set(answer_inputs(study.judge_sees))
    return [(name, label(name)) for name in study.judge_sees if name not in answers]


def rating_dimensions(study: SingleTurnStudy) -> list[tuple[str, str]]:
    """(key, label) of each dimension of the rubric the study's judges use: what a person rates."""
    return [(dimension.key, dimension.label) for dimension in load_rubric(study.rubric).dimensions]


def answer_label(study: SingleTurnStudy) -> str:
    """How the rated answer is named on the page (the study's label of its answer column)."""
    return label(study.answer_column)


def _answered(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def outputs(study: SingleTurnStudy, runs: pd.DataFrame, table_of: Callable[[str], pd.DataFrame]) -> list[Output]:
    """Every output with an answer to rate of a sweep's cell `runs` (their generations tables read by
    `table_of(run_id)`), run by run in run-id order, each run's rows in order."""
    found: list[Output] = []
    if runs.empty:
        return found
    for _, run in runs.sort_values("run_id").iterrows():
        table = table_of(run["run_id"])
        if table.empty or study.answer_column not in table.columns:
            continue
        found += [(run, row) for _, row in table.iterrows() if _answered(row[study.answer_column])]
    return found


def output_item_id(study: SingleTurnStudy, sweep: str, output: Output) -> str:
    """The output's item id: its sweep, item id, seed and run (the infilling study's pointwise ids are made alike)."""
    run, row = output
    return item_key(KIND, sweep, str(row[study.id_column]), int(row["seed"]), [run["run_id"]])


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def shown_context(study: SingleTurnStudy, output: Output, item: Item | None = None) -> dict[str, Any]:
    """Rubric input -> what the judge saw of it beside the answer: from the study's `item` when given (a derived input
    needs it), else from the row's item columns."""
    _, row = output
    names = [name for name, _ in context_inputs(study)]
    if item is not None:
        return {name: value for name, value in
                shown_to_judge(study.judge_sees, item, Answer(str(row[study.answer_column]))).items() if name in names}
    sources = {name: study.judge_sees[name] for name in names}
    return {name: row[source] for name, source in sources.items()
            if isinstance(source, str) and source in row and _present(row[source])}


def rating_item(study: SingleTurnStudy, sweep: str, output: Output,
                items_of: Callable[[str], Mapping[str, Item]] | None = None) -> AnnotationItem:
    """The output's item: its context (`shown_context`, as JSON: rubric input -> text) from the study's item in the
    data file its run read (`items_of(path)`: item id -> item) when there, else from its row; its answer; its
    provenance and the judges' scores of it."""
    run, row = output
    item_id = str(row[study.id_column])
    item = (items_of(str(run.get("params.data_path") or "")) if items_of is not None else {}).get(item_id)
    context = shown_context(study, output, item)
    return AnnotationItem(
        item_id=output_item_id(study, sweep, output), kind=KIND, study=study.experiment, sweep=sweep,
        instance_id=item_id, seed=int(row["seed"]), context=json.dumps(context, ensure_ascii=False, default=str),
        outputs=(str(row[study.answer_column]),), sources=(output_source(run, row),),
        judge_scores=(judge_scores_of(row),))


def item_context(item: AnnotationItem) -> dict[str, Any]:
    """What a rating item of this module shows beside its answer (rubric input -> text)."""
    return json.loads(item.context)


__all__ = ["KIND", "Output", "answer_label", "context_inputs", "item_context", "output_item_id", "outputs",
           "rating_dimensions", "rating_item", "shown_context"]
