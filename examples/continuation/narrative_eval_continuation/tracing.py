"""Continuation cells as MLflow records: a trace per (item, seed) with its scores; the items as dataset input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from narrative_eval.records import CellSpec, finite_number
from narrative_eval.tracing import AssessmentRecord, CellRecords, TraceRecord, generation_attributes

from narrative_eval_continuation.vocabulary import TABLE


def continuation_records(cell: CellSpec, result: Any) -> CellRecords:
    rows = result.tables.get(TABLE, [])
    traces = [TraceRecord(
        key=f"{row['item_id']}/seed{row['seed']}", name="continue", inputs={"messages": row["messages"]},
        outputs={"raw_reply": row["raw_reply"], "continuation": row["continuation"]}, rows=(index,),
        attributes={**generation_attributes(cell, row["seed"]), "item_id": row["item_id"], "domain": row["domain"],
                    "finish_reason": row["finish_reason"], "completion_tokens": row["completion_tokens"]},
        assessments=(AssessmentRecord("next_sentence", row["next_sentence"], "expectation", Path(cell.data_path).name),
                     *_scores(cell, row)),
    ) for index, row in enumerate(rows)]
    items = pd.DataFrame([{k: row[k] for k in ("item_id", "domain", "opening", "next_sentence")} for row in rows])
    return CellRecords(table=TABLE, traces=traces, dataset=items.drop_duplicates("item_id").reset_index(drop=True))


def _scores(cell: CellSpec, row: dict[str, Any]) -> list[AssessmentRecord]:
    """Metric scores (code), then each judge's dimensions and QAvg (llm_judge; None with the error where it failed)."""
    found = [AssessmentRecord(name, finite_number(row[name]), "code", "narrative_eval")
             for name in cell.metrics.names or () if name in row]
    for judge in cell.judges:
        prefix, error = f"judge/{judge.id}/", row.get(f"judge/{judge.id}/error") or "judge failed"
        found += [AssessmentRecord(f"{judge.id}/{key[len(prefix):]}", finite_number(value), "llm_judge",
                                   f"{judge.id} ({judge.model.id})", error=error if finite_number(value) is None else None)
                  for key, value in row.items() if key.startswith(prefix) and key != prefix + "error"]
    return found
