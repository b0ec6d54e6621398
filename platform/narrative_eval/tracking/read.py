"""Reading a sweep back from the tracking store: its runs, their tables and artifacts."""

from __future__ import annotations

import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from narrative_eval.errors import UserError
from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec
from narrative_eval.tracking.store import (
    TAG_KIND,
    TAG_SPEC_HASH,
    TAG_SWEEP,
    client,
    find_runs,
    tracking_uri,
)

pd = lazy_module("pandas")

mlflow = lazy_module("mlflow")
artifact_repositories = lazy_module("mlflow.store.artifact.artifact_repository_registry")


def find_sweep_run(experiment: str, sweep: str) -> str | None:
    runs = find_runs(experiment, f"tags.`{TAG_KIND}` = 'sweep' and tags.`{TAG_SWEEP}` = '{sweep}'")
    return runs[0].info.run_id if runs else None


def list_sweeps(experiment: str) -> list[str]:
    runs = find_runs(experiment, f"tags.`{TAG_KIND}` = 'sweep'")
    return [r.data.tags[TAG_SWEEP] for r in runs]


def finished_sweeps(experiment: str) -> list[str]:
    """The study's sweeps that have at least one finished cell, newest cell first."""
    runs = find_runs(experiment, f"tags.`{TAG_KIND}` = 'cell' and attributes.status = 'FINISHED'")
    runs.sort(key=lambda r: -(r.info.end_time or r.info.start_time or 0))
    return list(dict.fromkeys(r.data.tags[TAG_SWEEP] for r in runs if TAG_SWEEP in r.data.tags))


def all_sweeps() -> list[str]:
    """Every sweep name in the store, whatever its study, sorted."""
    c = client()
    ids = [e.experiment_id for e in c.search_experiments()]
    if not ids:
        return []
    runs = c.search_runs(ids, filter_string=f"tags.`{TAG_KIND}` = 'sweep'", max_results=5000)
    return sorted({r.data.tags[TAG_SWEEP] for r in runs if TAG_SWEEP in r.data.tags})


def find_cell_run(experiment: str, cell: CellSpec) -> tuple[str, str] | None:
    """(run_id, status) of this cell's run in its sweep, if one exists; a finished one wins."""
    runs = find_runs(
        experiment,
        f"tags.`{TAG_KIND}` = 'cell' and tags.`{TAG_SWEEP}` = '{cell.sweep}' and tags.`{TAG_SPEC_HASH}` = '{cell.spec_hash}'",
    )
    if not runs:
        return None
    runs.sort(key=lambda r: (r.info.status != "FINISHED", r.info.start_time))
    return runs[0].info.run_id, runs[0].info.status


def sweep_cell_runs(experiment: str, sweep: str, finished_only: bool = True, data_sha256: str | None = None) -> pd.DataFrame:
    """The sweep's cell runs as mlflow.search_runs returns them (params.*, metrics.*, tags.* columns); only
    those on one data file when `data_sha256` is given (a sweep name reused on other data holds both)."""
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    exp = client().get_experiment_by_name(experiment)
    if exp is None:
        return pd.DataFrame()
    query = f"tags.`{TAG_KIND}` = 'cell' and tags.`{TAG_SWEEP}` = '{sweep}'"
    if finished_only:
        query += " and attributes.status = 'FINISHED'"
    if data_sha256:
        query += f" and params.data_sha256 = '{data_sha256}'"
    return mlflow.search_runs([exp.experiment_id], filter_string=query, max_results=10000)


def report_cell_runs(experiment: str, sweep: str, data_sha256: str | None = None) -> pd.DataFrame:
    """The finished cell runs a sweep's report reads: those on `data_sha256`, or, when none is given, all of
    them as long as they share one data file (a report never mixes two data sets silently)."""
    runs = sweep_cell_runs(experiment, sweep, data_sha256=data_sha256)
    if runs.empty:
        on = f" on data {data_sha256[:12]}" if data_sha256 else ""
        raise ValueError(f"no finished cell runs for sweep {sweep!r}{on} in experiment {experiment!r} at {tracking_uri()}")
    if data_sha256 is None and "params.data_sha256" in runs:
        shas = sorted(set(runs["params.data_sha256"].dropna()))
        if len(shas) > 1:
            paths = sorted(set(runs["params.data_path"].dropna())) if "params.data_path" in runs else []
            raise UserError(f"sweep {sweep!r} ran on {len(shas)} different data files ({', '.join(paths) or ', '.join(shas)}); "
                            "name the one to report with --data FILE")
    return runs


def load_table(run_id: str, name: str) -> pd.DataFrame:
    """A table logged with log_table, as a DataFrame."""
    payload = load_json_artifact(run_id, name)
    return pd.DataFrame(payload["data"], columns=payload["columns"])


def load_json_artifact(run_id: str, name: str) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        repository = artifact_repositories.get_artifact_repository(_artifact_uri(tracking_uri(), run_id))
        path = repository.download_artifacts(name, tmp)
        return json.loads(Path(path).read_text())


@lru_cache(maxsize=4096)
def _artifact_uri(uri: str, run_id: str) -> str:
    """Where a run's artifacts live (fixed when the run is created). MLflow's `download_artifacts(run_id, ...)` asks the
    store for the run twice and looks for logged models on every call: 0.2 s a table, a report's largest cost."""
    return client().get_run(run_id).info.artifact_uri


def run_status_counts(experiment: str, sweep: str) -> dict[str, int]:
    runs = sweep_cell_runs(experiment, sweep, finished_only=False)
    if runs.empty:
        return {}
    return runs["status"].value_counts().to_dict()
