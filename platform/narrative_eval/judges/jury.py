"""Juries: judges already in a sweep read as one, with no call of their own (Verga et al. 2024).

A jury (`JurySpec`) names two or more of the sweep's judges and how their verdicts on one output become its own:
dimension by dimension, the mean or the median of the members' scores, or the score most members gave (each read as a
whole score first; several equally frequent: their median, an even split toward the lower; `judges.judge.
majority_verdict`). A jury gives a verdict only where more than half of its members gave a valid one (a quorum: a
jury of three with two failed members is not a jury but one judge); its failures are those outputs.
Everything a judge's verdict feeds (rows, headline numbers, traces, control checks, report card) takes a jury's the
same way, under the jury's id.

Every jury combines by `judges.judge.combine_scores` (with the judging engine, which combines a pairwise judge's
repeats by its majority), in a sweep and in `stats.judge_reliability.jury_scores` (a table of scores; also weighted by
the members' control checks, `member_weights` there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from narrative_eval.judges.checks import PAIRWISE_RELATIONS, ControlJudgment
from narrative_eval.judges.judge import MAJORITY_VERSION, combine_scores
from narrative_eval.judges.resumable import json_form
from narrative_eval.judges.validate import ADHERENCE, checklist_scores
from narrative_eval.records import JudgeResult, JurySpec, stable_hash


def jury_versions(juries: Sequence[JurySpec]) -> dict[str, str]:
    """What a cell's spec records of the code that combines its juries (`CellSpec.versions`, part of its hash): the
    majority rule's version where a jury combines by majority, so a cell made under the first rule is made again."""
    if any(jury.aggregate == "majority" for jury in juries):
        return {"jury/majority": f"version {MAJORITY_VERSION}"}
    return {}


def quorum(members: int) -> int:
    """The fewest valid member verdicts a jury of `members` needs to give one: more than half."""
    return members // 2 + 1


def jury_verdict(jury: JurySpec, members: Mapping[str, JudgeResult | None]) -> JudgeResult:
    """The jury's verdict on one output from its members' (`members`: judge id -> its verdict, None where it gave
    none): each dimension combined over the members that scored it; failed below the quorum, naming who failed."""
    found = [members.get(member) for member in jury.judges]
    valid = [(member, result) for member, result in zip(jury.judges, found, strict=True)
             if result is not None and result.ok]
    first = next((result for result in found if result is not None), None)
    common = {"judge_id": jury.id, "rubric": first.rubric if first else "", "rubric_hash": first.rubric_hash if first else "",
              "attempts": 0, "details": {"members": [member for member, _ in valid]}}
    if len(valid) < quorum(len(jury.judges)):
        failed = [member for member, result in zip(jury.judges, found, strict=True) if result is None or not result.ok]
        return JudgeResult(ok=False, error=f"{len(valid)} of {len(jury.judges)} members gave a valid verdict "
                                           f"(failed: {', '.join(failed)}; a jury needs {quorum(len(jury.judges))})",
                           **common)
    dimensions = list(dict.fromkeys(key for _, result in valid for key in result.scores))
    scores: dict[str, float | None] = {}
    for dimension in dimensions:
        given = [float(result.scores[dimension]) for _, result in valid if result.scores.get(dimension) is not None]
        scores[dimension] = combine_scores(given, jury.aggregate) if given else None
    items = _checklist_items(jury, valid)
    if items is not None:  # a checklist: each requirement combined, adherence their mean as a member's is
        common["details"]["items"] = items
        if set(scores) == {ADHERENCE} and items:
            scores.update(checklist_scores(items))
    return JudgeResult(ok=True, scores=scores, **common)


def _checklist_items(jury: JurySpec, valid: Sequence[tuple[str, JudgeResult]]) -> list[dict] | None:
    """A checklist's requirements, each with its members' scores combined (None: the verdicts list none)."""
    if not all(isinstance(result.details.get("items"), list) for _, result in valid):
        return None
    given: dict[str, list[float]] = {}
    for _, result in valid:
        for item in result.details["items"]:
            given.setdefault(str(item["constraint_id"]), []).append(float(item["score"]))
    return [{"constraint_id": rid, "score": combine_scores(found, jury.aggregate),
             "reason": f"{jury.aggregate} of {len(found)} members"} for rid, found in given.items()]


def jury_controls(jury: JurySpec, judged: Mapping[str, Sequence[ControlJudgment]]) -> list[ControlJudgment]:
    """The jury's verdicts on the control items its members judged (`judged`: judge id -> its judgments), item by
    item: so a jury is checked as a judge is, on the same items and with no call of its own. Its members judged the
    same items under one rubric; an item some member did not judge is not the jury's, nor is a pairwise one (a jury
    combines scores, not preferences)."""
    def key(judgment: ControlJudgment) -> str:
        item = judgment.item
        return stable_hash(json_form([item.rubric, item.check, item.instance_id, item.inputs, item.reference]))

    by_member = {member: {key(j): j for j in judged.get(member, [])} for member in jury.judges}
    first = judged.get(jury.judges[0], [])
    combined = []
    for judgment in first:
        if judgment.item.expected in PAIRWISE_RELATIONS:  # juries combine scores, not pairwise verdicts
            continue
        found = {member: by_member[member].get(key(judgment)) for member in jury.judges}
        if any(other is None for other in found.values()):
            continue
        result = jury_verdict(jury, {member: other.result for member, other in found.items()})
        reference = None if judgment.reference is None else jury_verdict(
            jury, {member: other.reference for member, other in found.items()})
        combined.append(ControlJudgment(judgment.item, result, reference))
    return combined


__all__ = ["jury_controls", "jury_verdict", "jury_versions", "quorum"]
