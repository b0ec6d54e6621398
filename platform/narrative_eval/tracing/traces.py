"""Write a cell's generations as MLflow traces, each carrying its assessments, linked to the cell's run."""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from narrative_eval.lazy import lazy_module
from narrative_eval.tracing.bulk import write_traces_batch
from narrative_eval.tracing.records import AssessmentRecord, TraceRecord

if TYPE_CHECKING:
    from mlflow import MlflowClient

mlflow = lazy_module("mlflow")

log = logging.getLogger(__name__)

TRACES_ENV = "NARRATIVE_EVAL_TRACES"
"""Set to 0 to skip traces (huge sweeps): a trace with its assessments costs 10-20 ms to write on 2 CPU cores."""

SOURCE_RUN = "mlflow.sourceRun"
"""Trace metadata key that links a trace to a run (MLflow's own, shown in the run's Traces tab)."""

TRACE_KEY_TAG = "narrative_eval.trace_key"
"""Trace tag: the record's key within its cell."""

TAGGED_ATTRIBUTES = ("model", "prompt_setting", "condition", "sweep")
"""Generation attributes also set as trace tags, so MLflow's trace list can be filtered by them
(`tags.model = 'smollm2'`)."""

BATCH = 500
"""Traces written per transaction."""

DIGITS = 4
"""Decimals of the numbers the platform writes on traces (scores, seconds, sampling settings)."""

_warned: set[str] = set()


def traces_enabled() -> bool:
    return os.environ.get(TRACES_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def warn_once(what: str, error: BaseException) -> None:
    """A store that cannot hold traces, datasets or prompts costs a warning, never the run."""
    if what not in _warned:
        _warned.add(what)
        log.warning("MLflow %s skipped (%s: %s); params, metrics and tables are logged as usual",
                    what, type(error).__name__, str(error)[:300])


def write_traces(client: MlflowClient, run_id: str, experiment_id: str, records: Sequence[TraceRecord],
                 fresh_run: bool = False) -> dict[str, str]:
    """Trace id per record key. Traces a killed earlier attempt of this run left are deleted first, so a
    resumed cell ends with exactly one trace per record and one assessment per (trace, name, source); a run this
    process created (`fresh_run`) has none to look for (the search reads every trace of the experiment: 0.3 s a
    cell in a store of 20,000)."""
    if not records or not traces_enabled():
        return {}
    try:
        from mlflow.tracing.client import TracingClient

        earlier = [] if fresh_run else mlflow.search_traces(locations=[experiment_id], run_id=run_id,
                                                            return_type="list", include_spans=False)
        if earlier:
            client.delete_traces(experiment_id, trace_ids=[t.info.trace_id for t in earlier])
        built = [_build(run_id, experiment_id, record) for record in records]
        # Written straight to the store, traces with their assessments and spans in batches (bulk.py). MLflow's
        # live-span exporter logs each span as it ends and the trace after, which a SQL store answers by re-merging
        # the trace row by row: about 90 ms per generation against about 1 here.
        store = TracingClient(client.tracking_uri)
        for start in range(0, len(built), BATCH):
            write_traces_batch(store, experiment_id, built[start : start + BATCH])
        return {record.key: info.trace_id for record, (info, _) in zip(records, built, strict=True)}
    except Exception as error:  # an older server, a store without the tracing tables
        warn_once("traces", error)
        return {}


def _build(run_id: str, experiment_id: str, record: TraceRecord) -> tuple[Any, list[Any]]:
    """The trace's info (with its assessments) and its spans: a root span, and one child per turn."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY, TraceMetadataKey, TraceTagKey
    from mlflow.tracing.utils import aggregate_usage_from_spans, generate_mlflow_trace_id_from_otel_trace_id
    from mlflow.tracing.utils.truncation import _get_truncated_preview

    # The generation happened earlier; its recorded seconds give the spans their real durations.
    end_ns = time.time_ns()
    turn_seconds = [_seconds(turn.attributes) for turn in record.turns]
    start_ns = end_ns - int(1e9 * (_seconds(record.attributes) or sum(turn_seconds)))
    otel_trace_id = secrets.randbits(128) or 1
    trace_id = generate_mlflow_trace_id_from_otel_trace_id(otel_trace_id)
    root_id = _span_id()
    spans = [_span(trace_id, otel_trace_id, root_id, None, record.name, "LLM" if not record.turns else "CHAIN",
                   record.inputs, record.outputs, record.attributes, start_ns, end_ns)]
    turn_start = start_ns
    for index, (turn, seconds) in enumerate(zip(record.turns, turn_seconds, strict=True), start=1):
        turn_end = turn_start + int(1e9 * seconds)
        spans.append(_span(trace_id, otel_trace_id, _span_id(), root_id, f"turn {index}", "LLM",
                           {"user": turn.user}, {"reply": turn.reply}, turn.attributes, turn_start, turn_end))
        turn_start = turn_end
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=start_ns // 1_000_000, execution_duration=(end_ns - start_ns) // 1_000_000, state=TraceState.OK,
        request_preview=_get_truncated_preview(_json(record.inputs), role="user"),
        response_preview=_get_truncated_preview(_json(record.outputs), role="assistant"),
        trace_metadata={SOURCE_RUN: run_id, TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION),
                        # The trace's token counts, as MLflow's exporter sends them: the store then takes them as
                        # final instead of re-adding every span's counts trace by trace when the spans come.
                        **({TraceMetadataKey.TOKEN_USAGE: _json(usage)} if (usage := aggregate_usage_from_spans(spans))
                           else {})},
        tags={TRACE_KEY_TAG: record.key, TraceTagKey.TRACE_NAME: record.name,
              **{key: str(record.attributes[key]) for key in TAGGED_ATTRIBUTES
                 if record.attributes.get(key) is not None}},
        assessments=[_entity(assessment, trace_id) for assessment in record.assessments],
    )
    return info, spans


def _span(trace_id: str, otel_trace_id: int, span_id: int, parent_id: int | None, name: str, span_type: str,
          inputs: Any, outputs: Any, attributes: dict[str, Any], start_ns: int, end_ns: int) -> Any:
    """One finished span, its attributes JSON-encoded as MLflow stores them."""
    from mlflow.entities import Span
    from mlflow.tracing.constant import SpanAttributeKey
    from mlflow.tracing.utils import build_otel_context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Status, StatusCode

    encoded = {SpanAttributeKey.REQUEST_ID: _json(trace_id), SpanAttributeKey.SPAN_TYPE: _json(span_type),
               SpanAttributeKey.INPUTS: _json(inputs), SpanAttributeKey.OUTPUTS: _json(outputs)}
    encoded |= {key: _json(rounded(value)) for key, value in _plain(attributes).items()}
    if (usage := _usage(attributes)) is not None:
        encoded[SpanAttributeKey.CHAT_USAGE] = _json(usage)
    return Span(ReadableSpan(
        name=name, context=build_otel_context(otel_trace_id, span_id),
        parent=build_otel_context(otel_trace_id, parent_id) if parent_id is not None else None,
        start_time=start_ns, end_time=end_ns, attributes=encoded, status=Status(StatusCode.OK),
        resource=Resource.get_empty(),
    ))


def _span_id() -> int:
    # Not the `random` module: a sweep seeds it, which would repeat ids across cells.
    return secrets.randbits(64) or 1


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""json.dumps(value, ensure_ascii=False, default=str), one encoder for every value (about 20 per span): dumps builds
one per call, and a plain string or number then skips the encoder's general path."""


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def _seconds(attributes: dict[str, Any]) -> float:
    value = attributes.get("seconds")
    return float(value) if isinstance(value, int | float) and value >= 0 else 0.0


def _usage(attributes: dict[str, Any]) -> dict[str, int] | None:
    """Token counts where MLflow's trace list looks for them (its Tokens column)."""
    prompt, completion = attributes.get("prompt_tokens"), attributes.get("completion_tokens")
    if not (isinstance(prompt, int | float) or isinstance(completion, int | float)):
        return None
    prompt, completion = int(prompt or 0), int(completion or 0)
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}


def _entity(record: AssessmentRecord, trace_id: str) -> Any:
    from mlflow.entities import (
        AssessmentError,
        AssessmentSource,
        AssessmentSourceType,
        Expectation,
        Feedback,
    )

    source_type = {"expectation": AssessmentSourceType.HUMAN, "code": AssessmentSourceType.CODE,
                   "llm_judge": AssessmentSourceType.LLM_JUDGE, "human": AssessmentSourceType.HUMAN}[record.kind]
    source = AssessmentSource(source_type=source_type, source_id=record.source_id)
    if record.kind == "expectation":
        return Expectation(name=record.name, value=record.value, source=source, trace_id=trace_id)
    error = AssessmentError(error_code="NOT_SCORED", error_message=record.error) if record.value is None and record.error else None
    return Feedback(name=record.name, value=rounded(record.value), source=source, rationale=record.rationale,
                    error=error, trace_id=trace_id)


def rounded(value: Any) -> Any:
    """Floats (also inside lists and dicts) to DIGITS decimals: a score reads 0.8123, not 0.812345678901234."""
    if isinstance(value, float):
        return round(value, DIGITS)
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def _plain(attributes: dict[str, Any]) -> dict[str, Any]:
    """Span attributes without Nones (MLflow stores them as JSON; None says nothing)."""
    return {k: v for k, v in attributes.items() if v is not None}


JUDGE_CHECK_METADATA = "narrative_eval.judge_check"
"""Assessment metadata key on a judge's scores when the judge failed its sweep's control checks: the warning."""


def flag_judge_assessments(client: MlflowClient, run_id: str, experiment_id: str, warnings: Mapping[str, str]) -> int:
    """On every trace of the run, each assessment of a judge of `warnings` (judge id -> the warning about it: it
    failed its control checks) gets the warning in its metadata (JUDGE_CHECK_METADATA) and after its rationale, as
    MLflow's trace view shows them; a judge that passed has its earlier warning removed from the rationale (the
    latest checks speak). The judges' assessments are named `<judge>/...`. Returns how many were updated: one request
    each, so a judge's warning costs about as many writes as it has scores in the run."""
    from mlflow.entities import AssessmentSourceType
    from mlflow.tracing.client import TracingClient

    if not traces_enabled():
        return 0
    store = TracingClient(client.tracking_uri).store
    updated = 0
    for trace in mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                      include_spans=False):
        for assessment in trace.info.assessments:
            judge = assessment.name.split("/", 1)[0]
            if assessment.source.source_type != AssessmentSourceType.LLM_JUDGE or "/" not in assessment.name:
                continue
            flagged = (assessment.metadata or {}).get(JUDGE_CHECK_METADATA, "")
            warning = warnings.get(judge, "")
            if warning == flagged:
                continue
            rationale = (assessment.rationale or "").removesuffix(flagged).rstrip()
            rationale = f"{rationale}\n\n{warning}".strip() if warning else rationale
            store.update_assessment(trace_id=trace.info.trace_id, assessment_id=assessment.assessment_id,
                                    rationale=rationale, metadata={JUDGE_CHECK_METADATA: warning})
            updated += 1
    return updated


def log_human_feedback(trace_id: str, name: str, value: Any, rater: str, rationale: str | None = None) -> bool:
    """A human rating (the app's Annotate tab) as feedback on a generation's trace; False if the store refused."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    try:
        mlflow.log_feedback(trace_id=trace_id, name=name, value=value, rationale=rationale,
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=rater))
        return True
    except Exception as error:
        warn_once("human feedback", error)
        return False
