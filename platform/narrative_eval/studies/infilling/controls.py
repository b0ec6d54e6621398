"""Control items of the infilling judges (judges.checks): fills whose judge verdict is known.

For each of K instances (judges.checks.sample_ids over instance ids), under the judge's infilling rubric:
- mismatched_fill: the gold fill of another passage of the same domain (fluent, on topic for its own passage,
  wrong here) must score below the gold fill;
- degenerate_fill: the sentence just before the blank repeated (just after it for a blank at the opening; an empty
  answer when the passage has neither) must score below the gold fill.
"""

from __future__ import annotations

from collections.abc import Sequence

from narrative_eval.data.infilling import domain, sentences, split_problem
from narrative_eval.judges import INFILLING_RUBRIC
from narrative_eval.judges.checks import DEFAULT_CONTROLS, ControlItem, pick_other, sample_ids
from narrative_eval.records import InfillingInstance

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
    gold, chosen stably (judges.checks.pick_other); None when the domain has no other passage."""
    candidates = {other.instance_id: other for other in pool
                  if domain(other.dataset) == domain(instance.dataset) and other.ref_id != instance.ref_id
                  and other.gold_answer.strip() != instance.gold_answer.strip()}
    chosen = pick_other(instance.instance_id, candidates)
    return candidates[chosen] if chosen is not None else None


def infilling_controls(instances: Sequence[InfillingInstance], k: int | None = DEFAULT_CONTROLS,
                       rubric: str | None = None) -> list[ControlItem]:
    """The control items of K of `instances` under `rubric` (default: the study's narrative rubric); the
    mismatched fills come from any of `instances`, so pass them all, not only the K."""
    rubric = rubric or INFILLING_RUBRIC
    by_id = {instance.instance_id: instance for instance in instances}
    items = []
    for instance_id in sample_ids(by_id, k):
        instance = by_id[instance_id]
        gold = {"problem": instance.problem, "candidate": instance.gold_answer}
        donor = mismatched_donor(instance, instances)
        if donor is not None:
            items.append(ControlItem(rubric, MISMATCHED, instance_id, {**gold, "candidate": donor.gold_answer},
                                     "below_reference", reference=gold))
        items.append(ControlItem(rubric, DEGENERATE, instance_id, {**gold, "candidate": degenerate_fill(instance)},
                                 "below_reference", reference=gold))
    return items


__all__ = ["DEGENERATE", "MISMATCHED", "degenerate_fill", "infilling_controls", "mismatched_donor"]
