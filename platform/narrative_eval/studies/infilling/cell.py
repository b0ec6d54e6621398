"""An infilling cell's items (the instances after the subset and the limit) and its judges' rubric; the library's
loop (narrative_eval.evaluation) runs the cell."""

from __future__ import annotations

from narrative_eval.data.instances import load_instances
from narrative_eval.records import CellSpec, InfillingInstance
from narrative_eval.studies.infilling.subset import spread_limit, stratified_subset
from narrative_eval.studies.infilling.vocabulary import RUBRIC


def select_instances(cell: CellSpec) -> list[InfillingInstance]:
    """The cell's instances: the data file, stratified subset, then the limit (spread over the strata)."""
    instances = load_instances(cell.data_path)
    if cell.subset is not None:
        instances = stratified_subset(instances, fraction=cell.subset.fraction, seed=cell.subset.seed)
    if cell.limit is not None:
        instances = spread_limit(instances, cell.limit)
    return instances


def judge_rubric(judge_rubric_name: str | None) -> str:
    """The rubric an infilling judge uses: its own, or the study's narrative rubric."""
    return judge_rubric_name or RUBRIC
