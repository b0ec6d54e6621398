"""A sweep's inputs as an MLflow evaluation dataset linked to its study's experiment, so MLflow's Datasets page
lists them: one dataset per study and data file version, one record per instance or task (its expected output,
when the study names one, as the record's expectations), tagged with the sweeps that used it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narrative_eval.records import CellSpec, stable_hash
from narrative_eval.tracing.base import CellRecords
from narrative_eval.tracing.bulk import merge_dataset_records

if TYPE_CHECKING:
    from mlflow import MlflowClient

SWEEPS_TAG = "narrative_eval.sweeps"
"""Dataset tag: the sweeps whose cells ran on it, comma-separated."""

_merged: set[tuple[str, str, str]] = set()
"""(tracking URI, dataset id, digest of the records) this process merged already: the cells of a sweep share their
data file, so each distinct set of records is merged once."""


def dataset_name(cell: CellSpec) -> str:
    """'<study> · <data file> (<first 8 hex digits of its sha256>)': a changed file gets a dataset of its own."""
    return f"{cell.study} · {Path(cell.data_path).name} ({cell.data_sha256[:8]})"


def register_evaluation_dataset(client: MlflowClient, experiment_id: str, cell: CellSpec,
                                records: CellRecords) -> str | None:
    """Create (or find) the cell's evaluation dataset, link it to the experiment, add the cell's inputs (records
    already there are updated, never duplicated) and tag it with the sweep; returns its id (None: no inputs)."""
    if records.dataset.empty:
        return None
    dataset = _find_or_create(client, experiment_id, cell)
    if experiment_id not in (dataset.experiment_ids or []):
        client.add_dataset_to_experiments(dataset.dataset_id, [experiment_id])
    # merge_records writes through the process's tracking store, which tracking.client() points at this client's.
    rows = evaluation_records(records)
    merged = (client.tracking_uri, dataset.dataset_id, stable_hash(rows))
    if merged not in _merged:
        merge_dataset_records(dataset, rows)
        _merged.add(merged)
    sweeps = [s for s in str((dataset.tags or {}).get(SWEEPS_TAG, "")).split(",") if s]
    if cell.sweep not in sweeps:
        client.set_dataset_tags(dataset.dataset_id, {SWEEPS_TAG: ",".join([*sweeps, cell.sweep])})
    return dataset.dataset_id


def _find_or_create(client: MlflowClient, experiment_id: str, cell: CellSpec) -> Any:
    name = dataset_name(cell)
    quoted = name.replace("'", "''")
    found = client.search_datasets(filter_string=f"name = '{quoted}'", max_results=1)
    if found:
        return found[0]
    tags = {"narrative_eval.study": cell.study, "narrative_eval.data_path": str(cell.data_path),
            "narrative_eval.data_sha256": cell.data_sha256}
    try:
        return client.create_dataset(name=name, experiment_id=[experiment_id], tags=tags)
    except Exception:
        # Another cell of the sweep created it in the meantime.
        found = client.search_datasets(filter_string=f"name = '{quoted}'", max_results=1)
        if not found:
            raise
        return found[0]


def evaluation_records(records: CellRecords) -> list[dict[str, Any]]:
    """One record per dataset row: the study's expectation columns as `expectations`, the rest as `inputs`."""
    rows = []
    for row in records.dataset.to_dict("records"):
        plain = {key: _plain(value) for key, value in row.items()}
        record: dict[str, Any] = {"inputs": {k: v for k, v in plain.items() if k not in records.expectations}}
        expected = {k: v for k, v in plain.items() if k in records.expectations and v is not None}
        if expected:
            record["expectations"] = expected
        rows.append(record)
    return rows


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars as Python numbers, NaN as None."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
