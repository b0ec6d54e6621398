"""Incremental-delivery cells as MLflow records: one trace per conversation (a span per turn), with the
judges' checklist items, adherence and quality dimensions as assessments."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec
from narrative_eval.records.keys import seeded
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.tracing import CellRecords, generation_attributes
from narrative_eval.tracing.records import AssessmentRecord, TraceRecord, TurnRecord

pd = lazy_module("pandas")

TABLE = "conversations.json"
"""A cell's table: one row per task, seed and turn."""


def conversation_records(cell: CellSpec, result: Any) -> CellRecords:
    """One trace per conversation of a finished cell (a span per turn), and its tasks as the dataset input."""
    rows = result.tables.get(TABLE, [])
    records = _records_by_conversation(result.artifacts.get("score_records.json", []))
    judge_models = {judge.id: judge.model.id for judge in cell.judges}
    traces = []
    indexed = list(enumerate(rows))
    for (story_id, seed), group in groupby(indexed, key=lambda item: (item[1]["story_id"], item[1]["seed"])):
        group = list(group)
        turns = [row for _, row in group]
        final = turns[-1]
        traces.append(TraceRecord(
            key=seeded(story_id, seed),
            name="conversation",
            inputs={"story_id": story_id, "condition": final["condition"], "user_turns": [t["user"] for t in turns]},
            outputs={"final_reply": final["reply"]},
            rows=tuple(index for index, _ in group),
            attributes={**generation_attributes(cell, seed), "story_id": story_id, "genre": final.get("genre"),
                        "turns": len(turns), "truncated": final.get("truncated"), "attempt": final.get("attempt")},
            turns=tuple(TurnRecord(t["user"], t["reply"], {"prompt_tokens": t.get("prompt_tokens"),
                                                          "completion_tokens": t.get("completion_tokens"),
                                                          "finish_reason": t.get("finish_reason")}) for t in turns),
            assessments=tuple(_scores(records.get((story_id, seed), []), judge_models)),
        ))
    return CellRecords(table=TABLE, traces=traces, dataset=_tasks(rows))


def _records_by_conversation(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Score records keyed by (story, seed); the seed is the `seed<k>` part of the record id."""
    found: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in records:
        seed = next((int(part[4:]) for part in record["record_id"].split("/") if part.startswith("seed") and part[4:].isdigit()), 0)
        found.setdefault((record["story_id"], seed), []).append(record)
    return found


def _scores(records: list[dict[str, Any]], judge_models: dict[str, str]) -> list[AssessmentRecord]:
    """Each judge's checklist items, adherence and quality dimensions; a judge with no score record for the
    conversation (its reply never validated, or the story was not scoreable) gets its dimensions as failed."""
    judged = {record["judge"] for record in records}
    scores = [AssessmentRecord(f"{judge}/{dimension}", None, "llm_judge", f"{judge} ({model})",
                               error="no valid judgment for this conversation")
              for judge, model in judge_models.items() if judge not in judged for dimension in QUALITY_FIELDS]
    for record in records:
        judge = record["judge"]
        source = f"{judge} ({judge_models.get(judge, '?')})"
        items = record.get("adherence") or []
        for item in items:
            scores.append(AssessmentRecord(f"{judge}/checklist/{item.get('constraint_id')}", item.get("score"), "llm_judge",
                                           source, error=None if item.get("score") is not None else "not judged"))
        values = [item["score"] for item in items if isinstance(item.get("score"), int | float)]
        if values:
            scores.append(AssessmentRecord(f"{judge}/adherence", sum(values) / len(values), "code", "narrative_eval"))
        for dimension, value in (record.get("quality") or {}).items():
            scores.append(AssessmentRecord(f"{judge}/{dimension}", value, "llm_judge", source,
                                           error=None if value is not None else "not scored"))
    return scores


def _tasks(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{"story_id": row["story_id"], "genre": row.get("genre")} for row in rows],
                         columns=["story_id", "genre"])
    return frame.drop_duplicates("story_id").reset_index(drop=True)
