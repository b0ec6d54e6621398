"""MLflow's evaluation records for a finished cell, beside its params, metrics and tables: the inputs as a
dataset (the run's input, and an evaluation dataset linked to the experiment), one trace per generation with
gold, metric and judge assessments (tagged with model, prompt setting and condition), the prompt versions used
(linked to the run and the experiment), and a run description. `mlflow ui` then shows what each model wrote,
not only its averages.

What is specific to a study (its traces and dataset, the prompts it used, its headline metrics) comes from the
study (`Study.cell_records`, `Study.used_templates`, `Study.headline_metrics`); this package writes it.
Every part is best effort: a store that refuses one (an older server) costs a warning, never the run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec, finite_number
from narrative_eval.tracing.base import CellEvaluation, CellRecords, generation_attributes
from narrative_eval.tracing.datasets import register_evaluation_dataset
from narrative_eval.tracing.prompts import register_prompts
from narrative_eval.tracing.records import AssessmentRecord, TraceRecord, TurnRecord
from narrative_eval.tracing.traces import (
    JUDGE_CHECK_METADATA,
    TRACES_ENV,
    flag_judge_assessments,
    log_human_feedback,
    traces_enabled,
    warn_once,
    write_traces,
)

pd = lazy_module("pandas")

if TYPE_CHECKING:
    from mlflow import MlflowClient

DESCRIPTION_TAG = "mlflow.note.content"
"""The run tag MLflow shows as a run's description."""


def log_cell_records(client: MlflowClient, run_id: str, cell: CellSpec, result: Any,
                     evaluation: CellEvaluation, fresh_run: bool = False,
                     experiment_id: str | None = None) -> dict[str, str]:
    """Dataset, traces, prompt versions and description of a finished cell, as its study gave them; adds
    `trace_id` to the rows of its table (`fresh_run`: created by this process, so it holds no earlier traces;
    `experiment_id`: its run's, when the caller read it already). Returns record key -> trace id."""
    records = evaluation.records
    trace_ids: dict[str, str] = {}
    experiment_id = experiment_id or client.get_run(run_id).info.experiment_id
    if records is not None:
        _log_dataset(client, run_id, experiment_id, cell, records)
        trace_ids = write_traces(client, run_id, experiment_id, records.traces, fresh_run)
        rows = result.tables.get(records.table, [])
        for trace in records.traces:
            for index in trace.rows:
                if trace.key in trace_ids:
                    rows[index]["trace_id"] = trace_ids[trace.key]
    _register_prompts(client, run_id, experiment_id, evaluation.templates)
    generations = len(records.traces) if records is not None else 0
    client.set_tag(run_id, DESCRIPTION_TAG,
                   describe_cell(cell, result.metrics, generations, evaluation.headline, evaluation.labels))
    return trace_ids


def _log_dataset(client: MlflowClient, run_id: str, experiment_id: str, cell: CellSpec, records: CellRecords) -> None:
    import mlflow.data
    from mlflow.entities import DatasetInput, InputTag

    if records.dataset.empty:
        return
    try:
        dataset = mlflow.data.from_pandas(records.dataset, source=str(cell.data_path), name=Path(cell.data_path).name,
                                          digest=dataset_digest(cell.data_sha256, records.dataset))
        client.log_inputs(run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(),
                                                         tags=[InputTag("mlflow.data.context", "evaluation")])])
    except Exception as error:
        warn_once("dataset inputs", error)
    try:
        register_evaluation_dataset(client, experiment_id, cell, records)
    except Exception as error:  # a file store, or a server without evaluation datasets
        warn_once("evaluation dataset", error)


def dataset_digest(file_sha256: str, rows: pd.DataFrame) -> str:
    """The file's digest (20 hex digits) then the rows' (12): MLflow keeps one dataset per name and digest, so a cell
    that used other rows of the same file (another limit or subset) must not reuse, and show, the first one's rows."""
    return file_sha256[:20] + hashlib.sha256(rows.to_json(orient="records").encode()).hexdigest()[:12]


def _register_prompts(client: MlflowClient, run_id: str, experiment_id: str, templates: dict[str, Any]) -> None:
    try:
        versions = register_prompts(client, run_id, experiment_id, templates)
    except Exception as error:
        warn_once("prompt registry", error)
        return
    if versions:
        client.set_tag(run_id, "narrative_eval.prompt_versions", ",".join(f"{n}/{v}" for n, v in versions.items()))


def describe_cell(cell: CellSpec, metrics: dict[str, float], generations: int, headline: list[str],
                  labels: dict[str, str] | None = None) -> str:
    """A cell run's description (markdown): what ran, on what, and its study's headline numbers under their labels."""
    lines = [f"**{cell.model.id} · {cell.prompt_setting} · {cell.condition}** — {cell.study}, "
             f"{generations} generations ({len(cell.seeds)} seed(s)) on `{Path(cell.data_path).name}`, "
             f"model `{cell.model.weights}` via {cell.model.backend}."]
    labels = labels or {}
    shown = [f"{labels.get(name) or _headline_label(name)} {metrics[name]:.3f}" for name in headline
             if finite_number(metrics.get(name)) is not None]
    if shown:
        lines.append("Headline: " + ", ".join(shown) + ".")
    return "\n\n".join(lines)


def _headline_label(name: str) -> str:
    """'judge/<id>/<metric>' -> '<id> <metric>'; other names as they are."""
    parts = name.split("/")
    return f"{parts[1]} {parts[2]}" if len(parts) == 3 and parts[0] == "judge" else name


JUDGE_FLAG = "**⚠ judge "
"""How a run description's paragraph warning about a judge that failed its control checks begins."""


def flagged_description(description: str, warnings: Mapping[str, str]) -> str:
    """A run's description with one paragraph per judge of `warnings` (judge id -> the warning: it failed its control
    checks) after its headline, in place of those an earlier sweep's checks wrote."""
    kept = [part for part in description.split("\n\n") if part and not part.startswith(JUDGE_FLAG)]
    return "\n\n".join([*kept, *(f"**{warning}**" for warning in warnings.values())])


def flag_failed_judges(client: MlflowClient, run_id: str, warnings: Mapping[str, str]) -> None:
    """Say on a finished cell run, wherever its judges' scores are written, which judges failed the sweep's control
    checks (judged after the cells, so the run was written before): its description (flagged_description) and its
    traces' judge assessments (traces.flag_judge_assessments). Best effort, as every evaluation record."""
    run = client.get_run(run_id)
    description = run.data.tags.get(DESCRIPTION_TAG, "")
    if not warnings and JUDGE_FLAG not in description:
        return  # nothing to flag, nor a flag of earlier checks to take back
    flagged = flagged_description(description, warnings)
    if flagged != description:
        client.set_tag(run_id, DESCRIPTION_TAG, flagged)
    try:
        flag_judge_assessments(client, run_id, run.info.experiment_id, warnings)
    except Exception as error:  # a store that cannot update assessments
        warn_once("judge-check flags on traces", error)


def describe_sweep(tables: dict[str, str]) -> str:
    """A sweep parent run's description: its first report table."""
    if not tables:
        return ""
    title, markdown = next(iter(tables.items()))
    return f"### {title}\n\n{markdown}"


__all__ = [
    "CellEvaluation",
    "DESCRIPTION_TAG",
    "JUDGE_CHECK_METADATA",
    "TRACES_ENV",
    "AssessmentRecord",
    "CellRecords",
    "TraceRecord",
    "TurnRecord",
    "dataset_digest",
    "generation_attributes",
    "describe_cell",
    "describe_sweep",
    "flag_failed_judges",
    "flagged_description",
    "log_cell_records",
    "log_human_feedback",
    "traces_enabled",
]
