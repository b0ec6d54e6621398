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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mlflow.tracing.client import TracingClient

log = logging.getLogger(__name__)

SERVER_REQUESTS = 8
"""Traces sent to a tracking server at once (MLflow's asynchronous trace logging uses up to 10 workers)."""

_fallback_warned: set[str] = set()


def write_traces_batch(tracing: TracingClient, experiment_id: str, traces: Sequence[tuple[Any, list[Any]]]) -> None:
    """Create every trace of `traces` ((TraceInfo with its tags, metadata and assessments, its finished spans)) in
    `experiment_id`."""
    if not traces:
        return
    store = tracing.store
    if _is_sql_store(store):
        try:
            _insert(store, experiment_id, traces)
            return
        except Exception as error:
            if not _is_schema_drift(error):
                raise
            if type(error).__name__ not in _fallback_warned:
                _fallback_warned.add(type(error).__name__)
                log.warning("traces written one by one: the batch insert does not fit this MLflow version (%s: %s)",
                            type(error).__name__, str(error)[:300])
    # A tracking server takes one trace per request: several in flight, as MLflow's asynchronous trace logging does.
    with ThreadPoolExecutor(SERVER_REQUESTS) as pool:
        list(pool.map(tracing.start_trace, [info for info, _ in traces]))
    tracing.log_spans(experiment_id, [span for _, spans in traces for span in spans])


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
