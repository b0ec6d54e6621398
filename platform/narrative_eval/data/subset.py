"""Stratified subsets of infilling instances (the studies' 10% subsets for seed and judge checks)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from narrative_eval.records import InfillingInstance


def stratum_size(size: int, fraction: float) -> int:
    """How many of a stratum of ``size`` instances to keep: max(1, round(fraction * size))."""
    return max(1, round(fraction * size))


def stratified_subset(
    instances: Sequence[InfillingInstance], fraction: float = 0.1, seed: int = 42
) -> list[InfillingInstance]:
    """Keep max(1, round(fraction * size)) instances of every (dataset, unit_idx) stratum.

    Each stratum is sampled with its own seeded generator, so a stratum's pick depends only on
    the seed and its own members; the kept instances stay in their original order.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    strata: dict[tuple[str, int], list[int]] = defaultdict(list)
    for position, instance in enumerate(instances):
        strata[(instance.dataset, instance.unit_idx)].append(position)
    keep: set[int] = set()
    for (dataset, unit_idx), members in strata.items():
        # A string seed is hashed deterministically by random.Random, independent of PYTHONHASHSEED.
        rng = random.Random(f"{seed}|{dataset}|{unit_idx}")
        keep.update(rng.sample(members, stratum_size(len(members), fraction)))
    return [instance for position, instance in enumerate(instances) if position in keep]
