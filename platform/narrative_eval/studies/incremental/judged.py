"""What one judge's two valid verdicts on a final story make: a score record (the published format) and its numbers,
adherence (the checklist's item mean), the quality dimensions and Creative Integrity."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from narrative_eval.records import CellSpec, JudgeResult
from narrative_eval.studies.incremental.effects import creative_integrity
from narrative_eval.studies.incremental.records import ScoreRecord, WritingTask
from narrative_eval.studies.incremental.score_records import model_label, record_id
from narrative_eval.studies.incremental.vocabulary import CHECKLIST, QUALITY, QUALITY_FIELDS, SCORE_DIMENSIONS


def score_record(cell: CellSpec, task: WritingTask, seed: int, judge_id: str,
                 verdicts: Mapping[str, JudgeResult]) -> ScoreRecord:
    """The score record of one judge's valid checklist and quality verdicts on one final reply."""
    checklist, quality = verdicts[CHECKLIST], verdicts[QUALITY]
    return ScoreRecord(
        record_id=record_id(cell, task.story_id, seed, judge_id), story_id=task.story_id, genre=task.domain,
        model=model_label(cell), condition=cell.condition, judge=judge_id,
        adherence=[{"constraint_id": item["constraint_id"], "score": float(item["score"])}
                   for item in checklist.details["items"]],
        quality={dim: (round(quality.scores[dim]) if quality.scores.get(dim) is not None else None)
                 for dim in QUALITY_FIELDS},
    )


def record_scores(record: ScoreRecord) -> dict[str, float | None]:
    """A score record's numbers under SCORE_DIMENSIONS: adherence (item mean), each quality score, ci."""
    items = [float(item["score"]) for item in record.adherence]
    adherence = sum(items) / len(items) if items else None
    ci = creative_integrity(adherence if adherence is not None else np.nan,
                            record.quality.get("structure_coherence") or np.nan)
    scores: dict[str, float | None] = {"adherence": adherence, "ci": None if math.isnan(ci) else ci}
    scores.update({dim: float(value) if (value := record.quality.get(dim)) is not None else None
                   for dim in QUALITY_FIELDS})
    return {dim: scores[dim] for dim in SCORE_DIMENSIONS}


__all__ = ["record_scores", "score_record"]
