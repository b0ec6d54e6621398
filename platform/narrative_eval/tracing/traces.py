"""Write a cell's generations as MLflow traces, each carrying its assessments, linked to the cell's run."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import mlflow
from mlflow import MlflowClient

from narrative_eval.tracing.records import AssessmentRecord, TraceRecord

log = logging.getLogger(__name__)

TRACES_ENV = "NARRATIVE_EVAL_TRACES"
"""Set to 0 to skip traces (huge sweeps): a trace with its assessments costs a few tens of ms to write."""

SOURCE_RUN = "mlflow.sourceRun"
"""Trace metadata key that links a trace to a run (MLflow's own, shown in the run's Traces tab)."""

TRACE_KEY_TAG = "narrative_eval.trace_key"
"""Trace tag: the record's key within its cell."""

_warned: set[str] = set()


def traces_enabled() -> bool:
    return os.environ.get(TRACES_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def warn_once(what: str, error: BaseException) -> None:
    """A store that cannot hold traces, datasets or prompts costs a warning, never the run."""
    if what not in _warned:
        _warned.add(what)
        log.warning("MLflow %s skipped (%s: %s); params, metrics and tables are logged as usual",
                    what, type(error).__name__, str(error)[:300])


def write_traces(client: MlflowClient, run_id: str, experiment_id: str, records: Sequence[TraceRecord]) -> dict[str, str]:
    """Trace id per record key. Traces a killed earlier attempt of this run left are deleted first, so a
    resumed cell ends with exactly one trace per record and one assessment per (trace, name, source)."""
    if not records or not traces_enabled():
        return {}
    try:
        earlier = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list", include_spans=False)
        if earlier:
            client.delete_traces(experiment_id, trace_ids=[t.info.trace_id for t in earlier])
        ids = {record.key: _write_one(run_id, experiment_id, record) for record in records}
        mlflow.flush_trace_async_logging()
        return ids
    except Exception as error:  # an older server, a store without the tracing tables
        warn_once("traces", error)
        return {}


def _write_one(run_id: str, experiment_id: str, record: TraceRecord) -> str:
    # The generation happened earlier; its recorded seconds give the spans their real durations.
    end_ns = time.time_ns()
    turn_seconds = [_seconds(turn.attributes) for turn in record.turns]
    start_ns = end_ns - int(1e9 * (_seconds(record.attributes) or sum(turn_seconds)))
    root = mlflow.start_span_no_context(
        record.name, span_type="LLM" if not record.turns else "CHAIN", inputs=record.inputs,
        attributes=_plain(record.attributes), tags={TRACE_KEY_TAG: record.key},
        metadata={SOURCE_RUN: run_id}, experiment_id=experiment_id, start_time_ns=start_ns,
    )
    _set_usage(root, record.attributes)
    turn_start = start_ns
    for index, (turn, seconds) in enumerate(zip(record.turns, turn_seconds, strict=True), start=1):
        span = mlflow.start_span_no_context(f"turn {index}", span_type="LLM", parent_span=root,
                                            inputs={"user": turn.user}, attributes=_plain(turn.attributes),
                                            start_time_ns=turn_start)
        _set_usage(span, turn.attributes)
        turn_start += int(1e9 * seconds)
        span.end(outputs={"reply": turn.reply}, end_time_ns=turn_start)
    _attach(root.trace_id, record.assessments)
    root.end(outputs=record.outputs, end_time_ns=end_ns)
    return root.trace_id


def _seconds(attributes: dict[str, Any]) -> float:
    value = attributes.get("seconds")
    return float(value) if isinstance(value, int | float) and value >= 0 else 0.0


def _set_usage(span: Any, attributes: dict[str, Any]) -> None:
    """Token counts where MLflow's trace list looks for them (its Tokens column)."""
    from mlflow.tracing.constant import SpanAttributeKey

    prompt, completion = attributes.get("prompt_tokens"), attributes.get("completion_tokens")
    if isinstance(prompt, int | float) or isinstance(completion, int | float):
        prompt, completion = int(prompt or 0), int(completion or 0)
        span.set_attribute(SpanAttributeKey.CHAT_USAGE, {"input_tokens": prompt, "output_tokens": completion,
                                                        "total_tokens": prompt + completion})


def _attach(trace_id: str, assessments: Sequence[AssessmentRecord]) -> None:
    """Put the assessments on the trace before it is exported, so trace and assessments are one write
    (logging each one after the fact is one round-trip per score)."""
    from mlflow.tracing.trace_manager import InMemoryTraceManager

    with InMemoryTraceManager.get_instance().get_trace(trace_id) as trace:
        trace.info.assessments.extend(_entity(a, trace_id) for a in assessments)


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
    return Feedback(name=record.name, value=record.value, source=source, rationale=record.rationale, error=error,
                    trace_id=trace_id)


def _plain(attributes: dict[str, Any]) -> dict[str, Any]:
    """Span attributes without Nones (MLflow stores them as JSON; None says nothing)."""
    return {k: v for k, v in attributes.items() if v is not None}


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
