"""Everything MLflow: sweep (parent) runs, cell (child) runs and what they log; reading back (`read.py`) and
the store itself (`store.py`) are re-exported here, so callers use `tracking.<name>` for all of it.

Layout (docs/formats.md): one experiment per study, one parent run per sweep, one child run per cell.
All logging goes through `MlflowClient` with explicit run ids, never the global active run, so
cells can run in threads, Ray workers or the app's background jobs without stepping on each other.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec, finite_number
from narrative_eval.tracing import DESCRIPTION_TAG, CellEvaluation, describe_sweep, log_cell_records
from narrative_eval.tracing.traces import warn_once
from narrative_eval.tracking.read import (
    all_sweeps,
    find_cell_run,
    find_sweep_run,
    finished_sweeps,
    list_sweeps,
    load_json_artifact,
    load_table,
    report_cell_runs,
    run_status_counts,
    sweep_cell_runs,
)
from narrative_eval.tracking.store import (
    DEFAULT_TRACKING_URI,
    TAG_KIND,
    TAG_PARENT,
    TAG_SPEC_HASH,
    TAG_SWEEP,
    client,
    experiment_id,
    find_runs,
    tracking_uri,
    unreachable,
)

pd = lazy_module("pandas")

mlflow = lazy_module("mlflow")
entities = lazy_module("mlflow.entities")

SECRET_WORDS = re.compile(r"(^|[_-])(api[_-]?key|key|token|secret|password|authorization)($|[_-])", re.IGNORECASE)
"""A secret-looking key names a secret as one of its words (api_key, access_token, Authorization); a count
such as max_new_tokens is not one, and must survive so a logged spec can be rerun."""
MAX_PARAM_LENGTH = 6000


_created_runs: set[str] = set()
"""Cell runs this process created and has not logged traces into yet: no earlier attempt left any there."""

_open_runs: dict[str, list[entities.Param]] = {}
"""Runs this process started or resumed and has not ended yet, with the params they must still carry (a stop
between creating a run and logging its params still leaves a run that says what it is; ended KILLED/FAILED)."""


@cache
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("narrative-eval")
    except PackageNotFoundError:
        return "unknown"


@cache
def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def redact(value: Any) -> Any:
    """Drop secret-looking entries from nested dicts before anything is logged."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if SECRET_WORDS.search(str(k)) and not str(k).endswith("_env") else redact(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."


# --------------------------------------------------------------------------- sweeps


def start_sweep_run(experiment: str, sweep: str, config: dict[str, Any]) -> str:
    """The sweep's parent run: reused when the sweep ran before (a rerun resumes it), else created."""
    c = client()
    runs = find_runs(experiment, f"tags.`{TAG_KIND}` = 'sweep' and tags.`{TAG_SWEEP}` = '{sweep}'")
    if runs:
        run_id = runs[0].info.run_id
        _open_runs[run_id] = []
        c.update_run(run_id, status="RUNNING")
    else:
        run = c.create_run(
            experiment_id(experiment),
            run_name=sweep,
            tags={TAG_KIND: "sweep", TAG_SWEEP: sweep, "narrative_eval.version": package_version()},
        )
        run_id = run.info.run_id
    _open_runs[run_id] = []
    c.log_dict(run_id, redact(config), "sweep_config.json")
    return run_id


def end_run(run_id: str, status: str = "FINISHED") -> None:
    client().set_terminated(run_id, status=status)
    _open_runs.pop(run_id, None)


def end_open_runs(status: str = "KILLED") -> list[str]:
    """End every run this process left open (a stopped or crashed sweep), newest first; their ids."""
    ended = []
    for run_id in reversed(list(_open_runs)):
        try:
            if _open_runs.get(run_id):
                _log_missing_params(client(), run_id)
            end_run(run_id, status)
            ended.append(run_id)
        except Exception:  # the store may be the thing that failed; what can be ended is ended
            continue
    return ended


# --------------------------------------------------------------------------- cells


_LOOK_UP: Any = object()


def start_cell_run(experiment: str, cell: CellSpec, parent_run_id: str,
                   existing: tuple[str, str] | None = _LOOK_UP) -> str:
    """The cell's run: an unfinished earlier attempt is resumed (never duplicated), else a new child run
    (`existing`: what `find_cell_run` answered, when the caller asked it already)."""
    if existing is _LOOK_UP:
        existing = find_cell_run(experiment, cell)
    c = client()
    params = [entities.Param(k, v) for k, v in cell_params(cell).items()]
    if existing is not None:
        run_id, _ = existing
        _open_runs[run_id] = params
        _created_runs.discard(run_id)  # resumed, even if this process created it: an attempt may have left traces
        c.update_run(run_id, status="RUNNING")
    else:
        run_id = _create_cell_run(c, experiment, cell, parent_run_id, params)
    # Params at the start, so a run stopped half-way still says what it is (model, setting, condition).
    _log_missing_params(c, run_id, None if existing is not None else {})
    return run_id


def hand_over(run_id: str) -> bool:
    """Leave the cell run `run_id`, started here, for another process to log (a Ray worker's cell, logged by the
    sweep's driver); True when this process created it, so it holds no traces yet: the other's `take_over` says so."""
    _open_runs.pop(run_id, None)
    fresh = run_id in _created_runs
    _created_runs.discard(run_id)
    return fresh


def take_over(run_id: str, fresh: bool) -> None:
    """Log the cell run `run_id` from this process (`hand_over`); until it is logged it is one of the runs
    `end_open_runs` ends."""
    _open_runs[run_id] = []
    if fresh:
        _created_runs.add(run_id)


def _log_missing_params(c: mlflow.MlflowClient, run_id: str, logged: dict[str, str] | None = None) -> None:
    """Log the params an open run still lacks (MLflow refuses to log a param twice; `logged`: those it holds,
    when known: none in a run just created)."""
    logged = c.get_run(run_id).data.params if logged is None else logged
    params = [p for p in _open_runs.get(run_id, []) if p.key not in logged]
    for start in range(0, len(params), 100):
        c.log_batch(run_id, params=params[start : start + 100])
    if run_id in _open_runs:
        _open_runs[run_id] = []


def _create_cell_run(c: mlflow.MlflowClient, experiment: str, cell: CellSpec, parent_run_id: str,
                     params: list[entities.Param]) -> str:
    run = c.create_run(
        experiment_id(experiment),
        run_name=cell.run_name,
        tags={
            TAG_KIND: "cell",
            TAG_SWEEP: cell.sweep,
            TAG_SPEC_HASH: cell.spec_hash,
            TAG_PARENT: parent_run_id,
            "narrative_eval.model": cell.model.id,
            "narrative_eval.prompt_setting": cell.prompt_setting,
            "narrative_eval.condition": cell.condition,
        },
    )
    _open_runs[run.info.run_id] = params
    _created_runs.add(run.info.run_id)
    return run.info.run_id


def cell_params(cell: CellSpec) -> dict[str, str]:
    """The params every cell run logs (docs/formats.md), flattened for `mlflow ui` columns."""
    model = cell.model
    params: dict[str, Any] = {
        "study": cell.study,
        "sweep": cell.sweep,
        "model_id": model.id,
        "backend": model.backend,
        "weights": model.weights,
        "quantization": model.quantization or "none",
        "prompt_setting": cell.prompt_setting,
        "condition": cell.condition,
        "seeds": list(cell.seeds),
        "temperature": cell.generation.temperature,
        "top_p": cell.generation.top_p,
        "max_new_tokens": cell.generation.max_new_tokens,
        "judges": [j.id for j in cell.judges],
        "judge_models": {j.id: j.model.weights for j in cell.judges},
        "judge_temperature": {j.id: j.temperature for j in cell.judges},
        **({"juries": [j.source for j in cell.juries]} if cell.juries else {}),
        "data_path": cell.data_path,
        "data_sha256": cell.data_sha256,
        "limit": cell.limit if cell.limit is not None else "none",
        "subset": cell.subset.model_dump() if cell.subset else "none",
        "spec_hash": cell.spec_hash,
        **({"code_versions": cell.versions} if cell.versions else {}),
        "package_version": package_version(),
        "git_commit": git_commit(),
    }
    return {k: _param_text(redact(v)) for k, v in params.items()}


def log_cell(run_id: str, cell: CellSpec, result: Any, evaluation: Callable[[], CellEvaluation] | None = None) -> None:
    """Log a finished cell's params, metrics, tables, artifacts and figures, then mark it FINISHED; `evaluation`
    gives its study's evaluation records (traces, dataset, prompts, headline metrics; none when not given)."""
    c = client()
    params = cell_params(cell)
    params.update({k: _param_text(redact(v)) for k, v in result.params.items()})
    run = c.get_run(run_id)
    existing = run.data.params
    now = int(time.time() * 1000)
    # A resumed run may already carry some params from an attempt killed while logging; params are immutable.
    new_params = [entities.Param(k, v) for k, v in params.items() if k not in existing]
    metrics = [entities.Metric(k, float(v), now, 0) for k, v in result.metrics.items() if finite_number(v) is not None]
    # MLflow caps a batch at 100 params and 1000 metrics.
    for start in range(0, len(new_params), 100):
        c.log_batch(run_id, params=new_params[start : start + 100])
    for start in range(0, len(metrics), 1000):
        c.log_batch(run_id, metrics=metrics[start : start + 1000])
    c.log_dict(run_id, redact(cell.model_dump(mode="json")), "cell_spec.json")
    # First: it adds each row's trace_id to the tables.
    _log_evaluation_records(c, run, cell, result, evaluation)
    for name, rows in result.tables.items():
        c.log_table(run_id, data=_table_frame(rows), artifact_file=name)
    for name, payload in result.artifacts.items():
        if name.endswith(".json"):
            c.log_dict(run_id, payload, name)
        else:
            c.log_text(run_id, payload if isinstance(payload, str) else json.dumps(payload, default=str), name)
    c.set_tag(run_id, "narrative_eval.generated", str(result.generated))
    c.set_terminated(run_id, status="FINISHED")
    _open_runs.pop(run_id, None)


def _log_evaluation_records(c: mlflow.MlflowClient, run: entities.Run, cell: CellSpec, result: Any,
                            evaluation: Callable[[], CellEvaluation] | None) -> None:
    """Dataset, traces with assessments, prompt versions, description (narrative_eval.tracing); a failure there
    is a warning, never a failed cell."""
    run_id = run.info.run_id
    fresh_run = run_id in _created_runs
    _created_runs.discard(run_id)  # from now on it may hold traces: logging it again replaces them
    try:
        log_cell_records(c, run_id, cell, result, evaluation() if evaluation is not None else CellEvaluation(),
                         fresh_run=fresh_run, experiment_id=run.info.experiment_id)
    except Exception as error:
        warn_once("evaluation records", error)


class CellWriter:
    """Logs finished cells (`log_cell`) on a thread of its own, in the order given, while the next cell generates:
    a fast engine then waits for no disk between cells. A cell's run turns FINISHED only once everything it logs
    is written, so a process killed with cells still queued leaves their runs unfinished and a rerun redoes them
    from the request cache. At most `depth` finished cells wait (memory stays bounded: the next one blocks)."""

    def __init__(self, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._failed: dict[str, str] = {}
        """Run id -> why logging it failed (its run is ended FAILED, as a cell that fails while running)."""
        self._thread = threading.Thread(target=self._drain, name="cell-writer", daemon=True)
        self._thread.start()

    def submit(self, run_id: str, cell: CellSpec, result: Any, evaluation: Callable[[], CellEvaluation] | None) -> None:
        self._queue.put((run_id, cell, result, evaluation))

    def close(self) -> dict[str, str]:
        """Wait until every submitted cell is written; run id -> error of each one that could not be logged."""
        self._queue.put(None)
        self._thread.join()
        return dict(self._failed)

    def _drain(self) -> None:
        while (job := self._queue.get()) is not None:
            run_id, cell, result, evaluation = job
            try:
                log_cell(run_id, cell, result, evaluation)
            except Exception as error:
                self._failed[run_id] = f"{type(error).__name__}: {error}"
                try:
                    end_run(run_id, "FAILED")
                    client().set_tag(run_id, "narrative_eval.error", self._failed[run_id][:5000])
                except Exception:  # the store itself failed; the run stays unfinished and a rerun redoes it
                    pass


def _table_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    # MLflow tables need scalar cells: nested values (messages, judge details) become JSON text.
    flat = [
        {k: (json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, dict | list | tuple) else v) for k, v in row.items()}
        for row in rows
    ]
    return pd.DataFrame(flat)


def log_sweep_outputs(run_id: str, tables: dict[str, str], files: Iterable[Path], metrics: dict[str, float] | None = None) -> None:
    """Attach the sweep's report (markdown tables and files) to its parent run."""
    c = client()
    for title, markdown in tables.items():
        c.log_text(run_id, markdown, f"report/{_slug(title)}.md")
    if tables:
        c.set_tag(run_id, DESCRIPTION_TAG, describe_sweep(tables))
    for path in files:
        c.log_artifact(run_id, str(path), artifact_path="report")
    if metrics:
        now = int(time.time() * 1000)
        c.log_batch(run_id, metrics=[entities.Metric(k, float(v), now, 0) for k, v in metrics.items() if finite_number(v) is not None])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_").lower() or "table"


__all__ = [
    "DEFAULT_TRACKING_URI",
    "CellWriter",
    "cell_params",
    "client",
    "end_open_runs",
    "end_run",
    "experiment_id",
    "find_cell_run",
    "find_sweep_run",
    "finished_sweeps",
    "hand_over",
    "all_sweeps",
    "list_sweeps",
    "load_json_artifact",
    "load_table",
    "log_cell",
    "log_sweep_outputs",
    "redact",
    "run_status_counts",
    "start_cell_run",
    "start_sweep_run",
    "report_cell_runs",
    "sweep_cell_runs",
    "take_over",
    "tracking_uri",
    "unreachable",
]
