"""The benchmark and passages shipped in data/infilling load cleanly and cover the design."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from narrative_eval.data import DOMAINS, domain, load_instances, sentences
from narrative_eval.studies.infilling.builder import build_instances, load_passages
from narrative_eval.studies.infilling.positions import blank_position
from narrative_eval.studies.infilling.subset import stratified_subset

DATA = Path(__file__).resolve().parents[2] / "data" / "infilling"
# Sentence counts each domain's passages are written to.
LENGTHS = {"encyclopedic": range(6, 10), "news": range(6, 9), "story": range(5, 6), "visual": range(5, 6)}


@pytest.fixture(scope="module")
def shipped():
    return load_instances(DATA / "benchmark.csv")


@pytest.fixture(scope="module")
def passages():
    return load_passages(DATA / "passages")


def test_benchmark_size_and_coverage(shipped) -> None:
    assert len(shipped) >= 360
    assert {i.n for i in shipped} == {1, 2, 3}
    assert {blank_position(i) for i in shipped} == {"opening", "middle", "closing"}
    assert {domain(i.dataset) for i in shipped} == set(DOMAINS)
    assert len({i.instance_id for i in shipped}) == len(shipped)


def test_passages_per_domain_and_lengths(passages) -> None:
    by_domain = defaultdict(set)
    for passage in passages:
        by_domain[domain(passage.dataset)].add(passage.ref_id)
        assert len(sentences(passage.text)) in LENGTHS[domain(passage.dataset)], passage.ref_id
    assert set(by_domain) == set(DOMAINS)
    assert all(len(refs) >= 30 for refs in by_domain.values())


def test_benchmark_passages_per_domain(shipped) -> None:
    refs = defaultdict(set)
    for instance in shipped:
        refs[domain(instance.dataset)].add(instance.ref_id)
    assert all(len(refs[d]) >= 30 for d in DOMAINS)


def test_gold_is_the_removed_sentences(shipped) -> None:
    for instance in shipped:
        parts = sentences(instance.source_text)
        removed = parts[instance.unit_idx : instance.unit_idx + instance.n]
        assert len(removed) == instance.n
        assert instance.gold_answer == " ".join(removed)


def test_benchmark_is_the_builder_output(shipped, passages) -> None:
    # The shipped file is exactly what the documented command produces.
    assert build_instances(passages, seed=0, per_passage=3) == shipped


def test_sample_is_a_small_slice_of_the_benchmark(shipped) -> None:
    sample = load_instances(DATA / "sample.jsonl")
    assert 8 <= len(sample) <= 16
    assert {i.n for i in sample} == {1, 2, 3}
    assert {domain(i.dataset) for i in sample} == set(DOMAINS)
    assert all(i in shipped for i in sample)


def test_ten_percent_subset_of_shipped_benchmark(shipped) -> None:
    sizes = Counter((i.dataset, i.unit_idx) for i in shipped)
    kept = Counter((i.dataset, i.unit_idx) for i in stratified_subset(shipped, 0.1, seed=42))
    assert kept == {stratum: max(1, round(0.1 * size)) for stratum, size in sizes.items()}
