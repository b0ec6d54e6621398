"""The incremental study's judges of a final story: its requirement checklist (adherence) and its writing quality."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from narrative_eval.judges import judge_many
from narrative_eval.judges.judge import GeneratingBackend
from narrative_eval.records import JudgeResult, JudgeSpec
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, QUALITY_RUBRIC


def judge_checklist(backend: GeneratingBackend, judge: JudgeSpec, items: Sequence[Mapping]) -> list[JudgeResult]:
    """Score requirement adherence; items are {task, requirements, response}.

    scores['adherence'] is the mean item score (A); details['items'] lists
    {constraint_id, score, reason} in requirement order.
    """
    return judge_many(backend, judge, CHECKLIST_RUBRIC, items)


def judge_quality(backend: GeneratingBackend, judge: JudgeSpec, items: Sequence[Mapping]) -> list[JudgeResult]:
    """Score writing quality on the judge's rubric (default: five dimensions, characterization may be None);
    items are {task, requirements, response}."""
    return judge_many(backend, judge, judge.rubric or QUALITY_RUBRIC, items)
