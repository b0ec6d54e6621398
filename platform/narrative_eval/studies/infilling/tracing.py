"""Infilling cells as MLflow records: one trace per (instance, seed) with gold, metric and judge assessments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from narrative_eval.records import CellSpec, finite_number
from narrative_eval.studies.infilling.vocabulary import AT_AVG, TABLE
from narrative_eval.tracing import CellRecords, generation_attributes
from narrative_eval.tracing.records import AssessmentRecord, TraceRecord

JUDGE_BOOKKEEPING = ("status", "raw", "error")
"""Per-judge row fields that are not scores."""


def infilling_records(cell: CellSpec, result: Any) -> CellRecords:
    """One trace per (instance, seed) of a finished cell, and its instances as the dataset input."""
    rows = result.tables.get(TABLE, [])
    metric_names = list(cell.metrics.names or ())
    traces = [
        TraceRecord(
            key=f"{row['instance_id']}/seed{row['seed']}",
            name="infill",
            inputs={"messages": row["messages"]},
            outputs={"raw_reply": row["raw_reply"], "answer": row["answer"], "extraction_status": row["extraction_status"]},
            rows=(index,),
            attributes={
                **generation_attributes(cell, row["seed"]),
                "instance_id": row["instance_id"], "dataset": row.get("dataset"), "domain": row.get("domain"),
                "position": row.get("position"), "n": row.get("n"), "finish_reason": row.get("finish_reason"),
                "prompt_tokens": row.get("prompt_tokens"), "completion_tokens": row.get("completion_tokens"),
                "seconds": row.get("seconds"),
                "extraction_status": row["extraction_status"], "error": row.get("error"),
            },
            assessments=(_gold(cell, row), *_metric_scores(row, metric_names), *_judge_scores(cell, row)),
        )
        for index, row in enumerate(rows)
    ]
    return CellRecords(table=TABLE, traces=traces, dataset=_instances(rows), expectations=("gold",))


def _gold(cell: CellSpec, row: dict[str, Any]) -> AssessmentRecord:
    return AssessmentRecord("gold", row["gold"], "expectation", Path(cell.data_path).name)


def _metric_scores(row: dict[str, Any], names: list[str]) -> list[AssessmentRecord]:
    why = None if row.get("answer") else f"no answer extracted ({row.get('extraction_status')})"
    return [AssessmentRecord(name, finite_number(row.get(name)), "code", "narrative_eval",
                             error=why if finite_number(row.get(name)) is None else None) for name in [*names, AT_AVG] if name in row]


def _judge_scores(cell: CellSpec, row: dict[str, Any]) -> list[AssessmentRecord]:
    scores = []
    for judge in cell.judges:
        prefix = f"judge/{judge.id}/"
        rationale = _rationale(row.get(prefix + "raw"))
        error = row.get(prefix + "error") or None
        for key, value in row.items():
            dimension = key[len(prefix):] if key.startswith(prefix) else None
            if dimension and dimension not in JUDGE_BOOKKEEPING:
                scores.append(AssessmentRecord(f"{judge.id}/{dimension}", finite_number(value), "llm_judge",
                                               f"{judge.id} ({judge.model.id})", rationale=rationale,
                                               error=(error or "judge failed") if finite_number(value) is None else None))
    return scores


def _rationale(raw: Any) -> str | None:
    """The judge's stated reason, when its reply is a JSON object that gives one."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw.strip().startswith("{") else None
    except ValueError:
        return None
    if isinstance(parsed, dict):
        for key in ("rationale", "reasoning", "explanation", "evidence"):
            if isinstance(parsed.get(key), str):
                return parsed[key]
    return None


def _instances(rows: list[dict[str, Any]]) -> pd.DataFrame:
    columns = ["instance_id", "dataset", "domain", "position", "n", "gold"]
    frame = pd.DataFrame([{c: row.get(c) for c in columns} for row in rows], columns=columns)
    return frame.drop_duplicates("instance_id").reset_index(drop=True)
