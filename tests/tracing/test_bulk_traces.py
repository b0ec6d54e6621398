"""Traces written in one transaction of the SQL store (tracing/bulk.py) read back exactly as MLflow's own
`start_trace` + `log_spans` write them: same info, tags, metadata, token usage, assessments and spans, only the ids
and clock times differ; an evaluation dataset's records merged in a batch read back as MLflow's merge_records leaves
them. This is the guard for an MLflow upgrade that changes what its store writes."""

from __future__ import annotations

import json
import os
import re

import mlflow
from mlflow import MlflowClient
from mlflow.tracing.client import TracingClient

from narrative_eval.tracing import bulk, traces
from narrative_eval.tracing.records import AssessmentRecord, TraceRecord, TurnRecord

RECORDS = [
    TraceRecord(
        key="enc/1/seed0", name="infill", inputs={"messages": [{"role": "user", "content": "Fill the blank, café."}]},
        outputs={"raw_reply": "<ANSWER>It rained.</ANSWER>", "answer": "It rained.", "extraction_status": "tag"},
        rows=(0,), attributes={"model": "m", "prompt_setting": "L2", "seed": 0, "seconds": 0.5, "prompt_tokens": 30,
                               "completion_tokens": 9, "temperature": 0.123456789},
        assessments=(AssessmentRecord("gold", "It poured.", "expectation", "benchmark.csv"),
                     AssessmentRecord("rouge1", 0.51234567, "code", "narrative_eval"),
                     AssessmentRecord("judge/coherence", None, "llm_judge", "judge (m)", rationale="unclear",
                                      error="judge failed"))),
    TraceRecord(
        key="story/1/seed0", name="conversation", inputs={"brief": "a story"}, outputs={"story": "Once."}, rows=(1,),
        attributes={"model": "m", "condition": "sharded", "seconds": 1.0},
        turns=(TurnRecord("first part", "reply one", {"prompt_tokens": 3, "completion_tokens": 4, "seconds": 0.2}),
               TurnRecord("second part", "reply two", {"prompt_tokens": 5, "completion_tokens": 6, "seconds": 0.3}))),
]


def _written(client: MlflowClient, experiment_id: str, how: str) -> dict[str, str]:
    """Trace key -> the trace as MLflow reads it back (JSON, its ids and times replaced by placeholders)."""
    run_id = client.create_run(experiment_id).info.run_id
    built = [traces._build(run_id, experiment_id, record) for record in RECORDS]
    store = TracingClient(client.tracking_uri)
    if how == "bulk":
        bulk.write_traces_batch(store, experiment_id, built)
    else:
        for info, _ in built:
            store.start_trace(info)
        store.log_spans(experiment_id, [span for _, spans in built for span in spans])
    found = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    return {trace.info.tags[traces.TRACE_KEY_TAG]: _normalised(trace, run_id) for trace in found}


def _normalised(trace, run_id: str) -> str:
    text = json.dumps(trace.to_dict(), sort_keys=True).replace(trace.info.trace_id, "<trace>").replace(run_id, "<run>")
    for assessment in trace.info.assessments:
        text = text.replace(assessment.assessment_id, "<assessment>")
    text = re.sub(r'"(trace_id|span_id|parent_span_id)": "[^"]+"', r'"\1": "<id>"', text)
    text = re.sub(r'"(start|end)_time_unix_nano": \d+', r'"\1": 0', text)
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", "<time>", text)


def written_both_ways(uri: str) -> tuple[dict[str, str], dict[str, str]]:
    """The records written in a batch and trace by trace into a new experiment of the store at `uri`, read back."""
    client = MlflowClient(uri)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = client.create_experiment(f"bulk-traces-{os.urandom(4).hex()}")
        assert bulk._is_sql_store(TracingClient(uri).store)
        return _written(client, experiment_id, "bulk"), _written(client, experiment_id, "mlflow")
    finally:
        mlflow.set_tracking_uri(previous)


def assert_alike(batch: dict[str, str], one_by_one: dict[str, str]) -> None:
    assert sorted(batch) == sorted(one_by_one) == sorted(record.key for record in RECORDS)
    for key in batch:
        assert batch[key] == one_by_one[key], key
    trace = json.loads(batch["story/1/seed0"])
    assert trace["info"]["trace_metadata"]["mlflow.trace.tokenUsage"] == json.dumps(
        {"input_tokens": 8, "output_tokens": 10, "total_tokens": 18})
    assert len(trace["data"]["spans"]) == 3


def session_store(isolated_stores) -> str:
    """The session's SQLite store by its path: the environment's URI may point at another test's server meanwhile
    (tests/scale/test_postgres_tracking.py's module sets it to its MLflow server)."""
    return f"sqlite:///{isolated_stores / 'mlflow.db'}"


def test_a_batch_reads_back_as_mlflow_writes_it_trace_by_trace(isolated_stores):
    assert_alike(*written_both_ways(session_store(isolated_stores)))


DATASET_ROWS = [
    [{"inputs": {"instance_id": "enc/1", "passage": "It rained, café."}, "expectations": {"gold": "It poured."}},
     {"inputs": {"instance_id": "enc/2", "passage": "The sun."}}],
    # Merged again: enc/1 gets a second expectation (updated, not duplicated), enc/3 is new, twice.
    [{"inputs": {"instance_id": "enc/1", "passage": "It rained, café."}, "expectations": {"gold_2": "Rain."}},
     {"inputs": {"instance_id": "enc/3", "passage": "A cat."}, "expectations": {"gold": "It sat."}},
     {"inputs": {"instance_id": "enc/3", "passage": "A cat."}, "expectations": {"gold_2": "It slept."}}],
]


def _dataset_written(client: MlflowClient, experiment_id: str, how: str) -> tuple[list[str], str, str]:
    """An evaluation dataset's records as MLflow reads them back (ids and times left out), its schema and profile."""
    dataset = client.create_dataset(name=f"records-{how}-{os.urandom(4).hex()}", experiment_id=[experiment_id])
    for rows in DATASET_ROWS:
        if how == "bulk":
            bulk.merge_dataset_records(dataset, rows)
        else:
            dataset.merge_records(rows)
    found = client.get_dataset(dataset.dataset_id)
    records = [json.dumps({k: v for k, v in record.to_dict().items()
                           if k not in ("dataset_record_id", "dataset_id", "created_time", "last_update_time")},
                          sort_keys=True) for record in found.records]
    return sorted(records), found.schema, found.profile


def test_dataset_records_merged_in_a_batch_read_back_as_mlflow_merges_them(isolated_stores):
    uri = session_store(isolated_stores)
    client = MlflowClient(uri)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = client.create_experiment(f"bulk-records-{os.urandom(4).hex()}")
        batch = _dataset_written(client, experiment_id, "bulk")
        one_by_one = _dataset_written(client, experiment_id, "mlflow")
    finally:
        mlflow.set_tracking_uri(previous)
    assert batch == one_by_one
    records = [json.loads(r) for r in batch[0]]
    expectations = [record.get("expectations") for record in records]
    assert len(records) == 3
    assert {"gold": "It poured.", "gold_2": "Rain."} in expectations
    assert {"gold": "It sat.", "gold_2": "It slept."} in expectations
    assert json.loads(batch[2])["num_records"] == 3
