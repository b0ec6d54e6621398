"""Many traces in one transaction of MLflow's SQL store.

MLflow 3 writes a trace with `start_trace`, one transaction each: it reads the experiment, inserts the trace
row with its tags, metadata and assessments through the ORM row by row, and commits (15-25 ms per trace on 2
CPU cores, most of a fast engine's sweep). Nothing public writes many at once: the asynchronous trace logging
(`MLFLOW_ENABLE_ASYNC_TRACE_LOGGING`) serves live spans, calls `start_trace` per trace from worker threads (one
SQLite file takes one writer at a time) and drops traces when its queue is full; span batching
(`MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE`) only reaches Databricks' Unity Catalog tables. `log_spans`
already writes many traces' spans in one transaction.

So for a SQL store (SQLite, PostgreSQL, MySQL: `SqlAlchemyStore`) `write_traces_batch` builds the rows as
`start_trace` and then `log_spans` leave them (MLflow's models and helpers: trace name, analytics columns, artifact
location and spans-location tags, finalisation marker, span content, rollup queue) and inserts a whole batch in one
transaction, one statement per table: one experiment read, one commit. Any other store (a tracking server over
HTTP) gets MLflow's `start_trace` per trace, several requests in flight, then one `log_spans`. A change in MLflow
that breaks the rows fails the batch before its commit; the batch then goes the server's way, with a warning once,
so an upgrade never loses traces (`tests/tracing/test_bulk_traces.py` compares both ways' traces field by field).

An evaluation dataset's records go the same way (`merge_dataset_records`): MLflow's `merge_records` upserts them
in one transaction but looks each record up by its inputs' hash in a query of its own (2,000 records: about 1.3 s
on 2 CPU cores); here one query finds the records already there, MLflow's own merge updates those, and the new
ones go in one statement, then the dataset's schema, profile and digest are updated as MLflow does.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow.tracing.client import TracingClient


log = logging.getLogger(__name__)

SERVER_REQUESTS = 8
"""Traces sent to a tracking server at once (MLflow's asynchronous trace logging uses up to 10 workers)."""

_fallback_warned: set[tuple[str, str]] = set()


def write_traces_batch(tracing: TracingClient, experiment_id: str, traces: Sequence[tuple[Any, list[Any]]]) -> None:
    """Create every trace of `traces` ((TraceInfo with its tags, metadata and assessments, its finished spans)) in
    `experiment_id`."""
    if not traces:
        return
    if _written_in_batch(tracing.store, "traces", lambda store: _insert(store, experiment_id, traces)):
        return
    # A tracking server takes one trace per request: several in flight, as MLflow's asynchronous trace logging does.
    with ThreadPoolExecutor(SERVER_REQUESTS) as pool:
        list(pool.map(tracing.start_trace, [info for info, _ in traces]))
    tracing.log_spans(experiment_id, [span for _, spans in traces for span in spans])


def merge_dataset_records(dataset: Any, records: list[dict[str, Any]]) -> None:
    """`dataset.merge_records(records)` (an evaluation dataset of the process's tracking store): records with the
    same inputs as one already there update it, the others are added."""
    from mlflow.tracking._tracking_service.utils import _get_store

    # _get_store(): the store merge_records writes to.
    if not _written_in_batch(_get_store(), "dataset records", lambda store: _upsert_records(store, dataset, records)):
        dataset.merge_records(records)


def _upsert_records(store: Any, dataset: Any, records: list[dict[str, Any]]) -> None:
    """MLflow's merge_records then SqlAlchemyStore.upsert_dataset_records, with the records looked up in one query
    and the new ones inserted in one statement."""
    from mlflow.entities import DatasetRecord, DatasetRecordSource
    from mlflow.store.tracking.dbmodels.models import SqlEvaluationDataset, SqlEvaluationDatasetRecord
    from mlflow.tracking.context import registry as context_registry
    from mlflow.utils.mlflow_tags import MLFLOW_USER
    from mlflow.utils.time import get_current_time_millis
    from sqlalchemy import insert

    # What merge_records does before it calls the store.
    records = [dict(record) for record in records]
    dataset._validate_record_dicts(records)
    dataset._infer_source_types(records)
    dataset._schema = store.get_dataset(dataset.dataset_id).schema
    dataset._validate_schema(records)
    if user := context_registry.resolve_tags().get(MLFLOW_USER):
        for record in records:
            record["tags"] = {MLFLOW_USER: user, **(record.get("tags") or {})}
    # What upsert_dataset_records does, the lookups and inserts batched.
    hashes = [hashlib.sha256(json.dumps(r.get("inputs", {}), sort_keys=True).encode()).hexdigest() for r in records]
    now = get_current_time_millis()
    updated_by = None
    with store.ManagedSessionMaker(read_only=False) as session:
        store._validate_dataset_accessible(session, dataset.dataset_id)
        existing: dict[str, Any] = {}
        for start in range(0, len(hashes), 500):
            existing |= {row.input_hash: row for row in session.query(SqlEvaluationDatasetRecord).filter(
                SqlEvaluationDatasetRecord.dataset_id == dataset.dataset_id,
                SqlEvaluationDatasetRecord.input_hash.in_(hashes[start : start + 500]))}
        new_rows: dict[str, dict[str, Any]] = {}
        for record, input_hash in zip(records, hashes, strict=True):
            tags = record.get("tags")
            if tags and MLFLOW_USER in tags:
                updated_by = tags[MLFLOW_USER]
            if input_hash in existing:
                existing[input_hash].merge(record)
            elif input_hash in new_rows:  # the same inputs twice in one call: MLflow merges the second into the first
                first = new_rows[input_hash]
                for key in ("expectations", "tags"):
                    if record.get(key):
                        first[key] = {**(first[key] or {}), **record[key]}
            else:
                source = record.get("source")
                created_by = tags.get(MLFLOW_USER) if tags else None
                entity = DatasetRecord(
                    dataset_record_id=None, dataset_id=dataset.dataset_id, inputs=record.get("inputs", {}),
                    outputs=record.get("outputs", {}), created_time=now, last_update_time=now,
                    expectations=record.get("expectations"), tags=tags,
                    source=DatasetRecordSource.from_dict(source) if isinstance(source, dict) else source,
                    created_by=created_by, last_updated_by=created_by)
                new_rows[input_hash] = _columns(SqlEvaluationDatasetRecord.from_mlflow_entity(entity, input_hash))
        session.flush()
        for same_columns in _by_columns(list(new_rows.values())):
            session.execute(insert(SqlEvaluationDatasetRecord.__table__), same_columns)
        name, schema = (store._dataset_query(session).with_entities(SqlEvaluationDataset.name,
                                                                    SqlEvaluationDataset.schema)
                        .filter(SqlEvaluationDataset.dataset_id == dataset.dataset_id).one())
        update: dict[str, Any] = {"last_update_time": now, "last_updated_by": updated_by,
                                  "digest": store._compute_dataset_digest(name, now)}
        if new_schema := store._update_dataset_schema(schema, records):
            update["schema"] = json.dumps(new_schema)
        if profile := store._compute_dataset_profile(session, dataset.dataset_id):
            update["profile"] = json.dumps(profile)
        store._dataset_query(session).filter(SqlEvaluationDataset.dataset_id == dataset.dataset_id).update(update)
    dataset._records = None


def _written_in_batch(store: Any, what: str, write: Callable[[Any], None]) -> bool:
    """`write(store)` where the store is a SQL store; False where it is not, or where the batch does not fit this
    MLflow version (said once per kind of error): the caller then writes `what` MLflow's way."""
    if not _is_sql_store(store):
        return False
    try:
        write(store)
        return True
    except Exception as error:
        if not _is_schema_drift(error):
            raise
        if (what, type(error).__name__) not in _fallback_warned:
            _fallback_warned.add((what, type(error).__name__))
            log.warning("%s written one by one: the batch insert does not fit this MLflow version (%s: %s)",
                        what, type(error).__name__, str(error)[:300])
        return False


def _is_sql_store(store: Any) -> bool:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    return isinstance(store, SqlAlchemyStore)


def _is_schema_drift(error: Exception) -> bool:
    """A batch that failed because the models or helpers changed (not because the store refused or is down)."""
    return isinstance(error, AttributeError | ImportError | TypeError | KeyError)


def _insert(store: Any, experiment_id: str, built: Sequence[tuple[Any, list[Any]]]) -> None:
    from mlflow.store.db.db_types import MSSQL
    from mlflow.store.tracking.dbmodels.models import (
        SqlAssessments,
        SqlSpan,
        SqlTraceInfo,
        SqlTraceMetadata,
        SqlTraceTag,
    )
    from mlflow.store.tracking.utils.sql_trace_rollups import RollupFamily, enqueue_rollup_rebuild_partitions
    from mlflow.store.tracking.utils.trace_analytics import (
        PROMOTED_TRACE_METADATA_KEYS,
        analytics_columns_from_metadata,
        bounded_model_dimension,
        validate_trace_name,
    )
    from mlflow.tracing.constant import SpanAttributeKey, SpansLocation, TraceMetadataKey, TraceTagKey
    from mlflow.tracing.otel.translation import translate_span_when_storing
    from mlflow.tracing.utils import TraceJSONEncoder
    from sqlalchemy import insert

    experiment = store.get_experiment(experiment_id)
    store._check_experiment_is_active(experiment)
    traces, tags, metadata_rows, assessments, spans = [], [], [], [], []
    for info, trace_spans in built:
        trace_id = info.trace_id
        metadata = dict(info.trace_metadata.items())
        traces.append({
            "request_id": trace_id, "experiment_id": info.experiment_id, "timestamp_ms": info.request_time,
            "execution_time_ms": info.execution_duration, "status": info.state.value,
            "client_request_id": info.client_request_id, "request_preview": info.request_preview,
            "response_preview": info.response_preview,
            "trace_name": validate_trace_name(info.tags.get(TraceTagKey.TRACE_NAME)),
            # What log_spans leaves on a trace whose spans it stored.
            "db_payload_generation": 1,
            **analytics_columns_from_metadata(metadata),
        })
        location = store._get_trace_artifact_location_tag(experiment, trace_id)
        tags += [{"request_id": trace_id, "key": k, "value": v} for k, v in info.tags.items()
                 if k != TraceTagKey.TRACE_NAME]
        tags.append({"request_id": trace_id, "key": location.key, "value": location.value})
        tags.append({"request_id": trace_id, "key": TraceTagKey.SPANS_LOCATION,
                     "value": SpansLocation.TRACKING_STORE.value})
        for key in PROMOTED_TRACE_METADATA_KEYS:
            metadata.pop(key, None)
        metadata[TraceMetadataKey.TRACE_INFO_FINALIZED] = "true"
        metadata_rows += [{"request_id": trace_id, "key": k, "value": v} for k, v in sorted(metadata.items())]
        for assessment in info.assessments:
            row = _columns(SqlAssessments.from_mlflow_entity(assessment))
            row.update(trace_id=trace_id, experiment_id=int(info.experiment_id), trace_timestamp_ms=info.request_time)
            assessments.append(row)
        for span in trace_spans:
            stored = translate_span_when_storing(span)
            attributes = stored.get("attributes") or {}
            spans.append({
                "trace_id": span.trace_id, "experiment_id": int(info.experiment_id), "span_id": span.span_id,
                "parent_span_id": span.parent_id, "name": span.name, "type": span.span_type,
                "status": span.status.status_code, "start_time_unix_nano": span.start_time_ns,
                "end_time_unix_nano": span.end_time_ns,
                "content": json.dumps(stored, cls=TraceJSONEncoder, ensure_ascii=store.db_type == MSSQL),
                "input_cost": None, "output_cost": None, "total_cost": None,
                "model_name": bounded_model_dimension(_plain(attributes.get(SpanAttributeKey.MODEL))),
                "model_provider": bounded_model_dimension(_plain(attributes.get(SpanAttributeKey.MODEL_PROVIDER))),
            })
    times = sorted({info.request_time for info, _ in built})
    span_times = sorted({span["start_time_unix_nano"] // 1_000_000 for span in spans})
    with store.ManagedSessionMaker(read_only=False) as session:
        enqueue_rollup_rebuild_partitions(session, [
            *((family, int(experiment_id), times) for family in (RollupFamily.TRACE_METRIC, RollupFamily.ASSESSMENT)),
            (RollupFamily.SPAN_COST, int(experiment_id), span_times)])
        # Core inserts, one statement per table and set of columns: the ORM would insert the trace rows one by one.
        for model, rows in ((SqlTraceInfo, traces), (SqlTraceTag, tags), (SqlTraceMetadata, metadata_rows),
                            (SqlAssessments, assessments), (SqlSpan, spans)):
            for same_columns in _by_columns(rows):
                session.execute(insert(model.__table__), same_columns)


def _plain(value: Any) -> Any:
    """A span attribute as MLflow stores it (JSON text), decoded; None stays None."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _columns(row: Any) -> dict[str, Any]:
    """The columns an ORM row was given, as a dict (what its insert would write)."""
    return {column.key: row.__dict__[column.key] for column in row.__table__.columns if column.key in row.__dict__}


def _by_columns(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows grouped by their set of columns: one executemany each (a missing column keeps its default)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    return list(groups.values())
