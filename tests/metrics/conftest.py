"""Session-wide scorers: each model loads once for the whole metrics test session."""

from __future__ import annotations

import pytest

from narrative_eval.metrics import BertScore, ChrF, Meteor, Rouge1, SemF1
from narrative_eval.metrics.wordnet import ensure_wordnet
from narrative_eval.records import MetricsSpec


@pytest.fixture(scope="session")
def metrics_spec() -> MetricsSpec:
    return MetricsSpec()


@pytest.fixture(scope="session")
def bertscore(metrics_spec: MetricsSpec) -> BertScore:
    return BertScore.from_spec(metrics_spec)


@pytest.fixture(scope="session")
def semf1(metrics_spec: MetricsSpec) -> SemF1:
    return SemF1.from_spec(metrics_spec)


@pytest.fixture(scope="session")
def meteor() -> Meteor:
    ensure_wordnet()
    return Meteor()


@pytest.fixture(scope="session")
def rouge1() -> Rouge1:
    return Rouge1()


@pytest.fixture(scope="session")
def chrf() -> ChrF:
    return ChrF()
