"""Control items of the infilling judges (judges.checks): fills whose judge verdict is known.

For each of K instances of a sweep (judges.checks.sample_ids over the ids its cells fill), under the judge's
infilling rubric:
- mismatched_fill: the gold fill of another passage of the same domain (fluent, on topic for its own passage,
  wrong here; of another domain where the data has one passage per domain) must score below the gold fill;
- degenerate_fill: the sentence just before the blank repeated (just after it for a blank at the opening; an empty
  answer when the passage has neither) must score below the gold fill;
- padded_output: the gold fill padded with neutral filler (judges.checks.padded_text) must not score above it.
"""

from __future__ import annotations

from collections.abc import Sequence

from narrative_eval.data.instances import domain, load_instances, sentences, split_problem
from narrative_eval.judges.checks import DEFAULT_CONTROLS, PADDED, ControlItem, ControlSet, padded_text
from narrative_eval.judges.checks import pick_other, sample_ids
from narrative_eval.records import CellSpec, InfillingInstance, JudgeSpec
from narrative_eval.studies.infilling.cell import judge_rubric, select_instances
from narrative_eval.studies.infilling.vocabulary import RUBRIC

MISMATCHED = "mismatched_fill"
"""Check: another passage's gold fill against this passage's."""

DEGENERATE = "degenerate_fill"
"""Check: a neighbouring sentence copied into the blank against the gold fill."""


def degenerate_fill(instance: InfillingInstance) -> str:
    """The sentence before the blank (after it when the blank opens the passage), or '' when there is none."""
    before, after = split_problem(instance.problem)
    previous, following = sentences(before), sentences(after)
    if previous:
        return previous[-1]
    return following[0] if following else ""


def mismatched_donor(instance: InfillingInstance, pool: Sequence[InfillingInstance]) -> InfillingInstance | None:
    """The instance whose gold is shown as a mismatched fill: another passage of the same domain with a different
    gold, chosen stably (judges.checks.pick_other); of another domain when the pool has no other passage of this
    one (a small sample: one passage per domain); None when the pool has no other passage at all."""
    others = [other for other in pool if other.ref_id != instance.ref_id
              and other.gold_answer.strip() != instance.gold_answer.strip()]
    same = [other for other in others if domain(other.dataset) == domain(instance.dataset)]
    candidates = {other.instance_id: other for other in same or others}
    chosen = pick_other(instance.instance_id, candidates)
    return candidates[chosen] if chosen is not None else None


def infilling_controls(instances: Sequence[InfillingInstance], k: int | None = DEFAULT_CONTROLS,
                       rubric: str | None = None, pool: Sequence[InfillingInstance] | None = None) -> list[ControlItem]:
    """The control items of K of `instances` under `rubric` (default: the study's narrative rubric); the
    mismatched fills come from any instance of `pool` (default: `instances`), so pass them all, not only the K."""
    rubric = rubric or RUBRIC
    by_id = {instance.instance_id: instance for instance in instances}
    items = []
    for instance_id in sample_ids(by_id, k):
        instance = by_id[instance_id]
        gold = {"problem": instance.problem, "candidate": instance.gold_answer}
        donor = mismatched_donor(instance, instances if pool is None else pool)
        if donor is not None:
            items.append(ControlItem(rubric, MISMATCHED, instance_id, {**gold, "candidate": donor.gold_answer},
                                     "below_reference", reference=gold))
        items.append(ControlItem(rubric, DEGENERATE, instance_id, {**gold, "candidate": degenerate_fill(instance)},
                                 "below_reference", reference=gold))
        padded = padded_text(instance.gold_answer, 0, instance_id)
        if padded is not None:
            items.append(ControlItem(rubric, PADDED, instance_id, {**gold, "candidate": padded}, "padded_not_above",
                                     reference=gold))
    return items


def sweep_controls(cells: Sequence[CellSpec], judge: JudgeSpec, k: int) -> list[ControlSet]:
    """A sweep's control items for one judge: K of the instances its cells fill (every cell fills the same ones),
    under the judge's rubric, the mismatched fills drawn from the whole data file."""
    cell = cells[0]
    items = infilling_controls(select_instances(cell), k, judge_rubric(judge.rubric), load_instances(cell.data_path))
    return [ControlSet(judge, tuple(items))] if items else []


__all__ = ["DEGENERATE", "MISMATCHED", "degenerate_fill", "infilling_controls", "mismatched_donor", "sweep_controls"]
