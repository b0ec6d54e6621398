"""Stratified subsets of infilling instances (the studies' 10% subsets for seed and judge checks)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from narrative_eval.records import InfillingInstance


def stratum_size(size: int, fraction: float) -> int:
    """How many of a stratum of ``size`` instances to keep: max(1, round(fraction * size))."""
    return max(1, round(fraction * size))


def _strata(instances: Sequence[InfillingInstance]) -> dict[tuple[str, int], list[int]]:
    """Positions of the instances of each (dataset, unit_idx) stratum, strata in order of first appearance."""
    strata: dict[tuple[str, int], list[int]] = defaultdict(list)
    for position, instance in enumerate(instances):
        strata[(instance.dataset, instance.unit_idx)].append(position)
    return strata


def stratified_subset(
    instances: Sequence[InfillingInstance], fraction: float = 0.1, seed: int = 42
) -> list[InfillingInstance]:
    """Keep max(1, round(fraction * size)) instances of every (dataset, unit_idx) stratum.

    Each stratum is sampled with its own seeded generator, so a stratum's pick depends only on
    the seed and its own members; the kept instances stay in their original order.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    strata = _strata(instances)
    keep: set[int] = set()
    for (dataset, unit_idx), members in strata.items():
        # A string seed is hashed deterministically by random.Random, independent of PYTHONHASHSEED.
        rng = random.Random(f"{seed}|{dataset}|{unit_idx}")
        keep.update(rng.sample(members, stratum_size(len(members), fraction)))
    return [instance for position, instance in enumerate(instances) if position in keep]


def spread_limit(instances: Sequence[InfillingInstance], limit: int) -> list[InfillingInstance]:
    """The first ``limit`` instances taken round-robin over the (dataset, unit_idx) strata.

    A small run (``--limit``) then spans every domain and span length instead of the head of
    the file, which is sorted by dataset. Within a stratum, file order is kept; the kept
    instances come back in file order.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    strata = _strata(instances)
    # Round-robin: the first member of every stratum (in order of first appearance), then the second...
    queues = list(strata.values())
    deepest = max((len(q) for q in queues), default=0)
    round_robin = [q[depth] for depth in range(deepest) for q in queues if depth < len(q)]
    chosen = set(round_robin[:limit])
    return [instance for position, instance in enumerate(instances) if position in chosen]
