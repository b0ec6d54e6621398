"""Stratified subsets: per-(dataset, unit_idx) sizes, seeding and order."""

from __future__ import annotations

from collections import Counter

import pytest

from narrative_eval.records import InfillingInstance
from narrative_eval.studies.infilling.subset import spread_limit, stratified_subset


def make(dataset: str, ref: int, unit_idx: int) -> InfillingInstance:
    return InfillingInstance(
        dataset=dataset,
        ref_id=str(ref),
        source_text="A. <eos> B. <eos> C. <eos> D.",
        problem="A. ______ D.",
        gold_answer="B.",
        n=1,
        unit_idx=unit_idx,
    )


def interleaved_instances() -> list[InfillingInstance]:
    # Strata of many sizes (including ones where 0.1 * size rounds to 0 or sits on .5),
    # interleaved so order preservation is actually tested.
    sizes = {("wikipedia", 0): 1, ("wikipedia", 1): 4, ("wikipedia", 3): 5, ("sind", 0): 15,
             ("sind", 2): 25, ("rocstories", 1): 26, ("cnn_dailymail", 4): 37}
    instances = []
    for ref in range(max(sizes.values())):
        for (dataset, unit_idx), size in sizes.items():
            if ref < size:
                instances.append(make(dataset, ref, unit_idx))
    return instances


def test_each_stratum_keeps_max_one_or_rounded_tenth() -> None:
    instances = interleaved_instances()
    sizes = Counter((i.dataset, i.unit_idx) for i in instances)
    subset = stratified_subset(instances, fraction=0.1, seed=42)
    kept = Counter((i.dataset, i.unit_idx) for i in subset)
    assert kept == {stratum: max(1, round(0.1 * size)) for stratum, size in sizes.items()}


def test_subset_is_seeded_and_keeps_original_order() -> None:
    instances = interleaved_instances()
    subset = stratified_subset(instances, seed=42)
    assert stratified_subset(instances, seed=42) == subset
    assert stratified_subset(instances, seed=7) != subset
    positions = [instances.index(i) for i in subset]
    assert positions == sorted(positions)


def test_full_fraction_keeps_everything_and_bad_fraction_fails() -> None:
    instances = interleaved_instances()
    assert stratified_subset(instances, fraction=1.0) == instances
    with pytest.raises(ValueError):
        stratified_subset(instances, fraction=0.0)
    assert stratified_subset([], fraction=0.1) == []


def test_limit_spreads_over_strata_round_robin() -> None:
    # A file sorted by dataset, as the shipped benchmark is: its head is one stratum only.
    instances = [make(d, ref, u) for d, u, size in [("wikipedia", 1, 4), ("sind", 2, 3), ("rocstories", 3, 1)]
                 for ref in range(size)]
    picked = spread_limit(instances, 5)
    # Round 1 takes the first of each stratum, round 2 the second of the strata that have one.
    assert [(i.dataset, i.ref_id) for i in picked] == [
        ("wikipedia", "0"), ("wikipedia", "1"), ("sind", "0"), ("sind", "1"), ("rocstories", "0")]
    assert spread_limit(instances, 100) == instances
    assert spread_limit(instances, 0) == []
    with pytest.raises(ValueError):
        spread_limit(instances, -1)


def test_small_limits_on_the_shipped_benchmark_span_every_domain(repo_root) -> None:
    """Bug 3: --limit N <= 8 on benchmark.csv (sorted by dataset) used to take encyclopedic passages only."""
    from narrative_eval.data import domain, load_instances

    instances = load_instances(repo_root / "data" / "infilling" / "benchmark.csv")
    domains = {domain(i.dataset) for i in instances}
    assert len(domains) == 4
    for limit in range(4, 13):
        picked = spread_limit(instances, limit)
        assert len(picked) == limit
        assert {domain(i.dataset) for i in picked} == domains, limit
    # Then span lengths: twelve instances give every domain each of n = 1, 2, 3.
    twelve = spread_limit(instances, 12)
    assert Counter((domain(i.dataset), i.n) for i in twelve) == {(d, n): 1 for d in domains for n in (1, 2, 3)}
