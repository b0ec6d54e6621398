"""Stratified subsets of infilling instances (the studies' 10% subsets for seed and judge checks)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from narrative_eval.data.instances import domain
from narrative_eval.data.rows import spread_limit as generic_spread
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
    """``limit`` instances taken round-robin over domains first, then span length (n), then blank position.

    A small run (``--limit``) then spans every domain (any limit >= 4 on a four-domain file), then
    every span length, instead of the head of a file sorted by dataset. Groups come in order of first
    appearance and, within one, file order is kept; the kept instances come back in file order.
    """
    return generic_spread(instances, limit, lambda i: domain(i.dataset), lambda i: i.n, lambda i: i.unit_idx)
