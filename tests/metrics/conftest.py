"""Session-wide scorers: each model loads once for the whole metrics test session."""

from __future__ import annotations

import pytest

from narrative_eval.metrics.bertscore import BertScore
from narrative_eval.metrics.chrf import ChrF
from narrative_eval.metrics.meteor import Meteor
from narrative_eval.metrics.rouge1 import Rouge1
from narrative_eval.metrics.semf1 import SemF1
from narrative_eval.metrics.wordnet import ensure_wordnet
from narrative_eval.records import MetricsSpec


@pytest.fixture(scope="session")
def metrics_spec() -> MetricsSpec:
    return MetricsSpec()


@pytest.fixture(scope="session")
def bertscore(metrics_spec: MetricsSpec) -> BertScore:
    scorer = BertScore.from_spec(metrics_spec)
    scorer.score(["warm-up"], ["warm-up"])  # load the model here, not inside the first test
    return scorer


@pytest.fixture(scope="session")
def semf1(metrics_spec: MetricsSpec) -> SemF1:
    scorer = SemF1.from_spec(metrics_spec)
    scorer.score(["warm-up"], ["warm-up"])
    return scorer


@pytest.fixture(scope="session")
def meteor() -> Meteor:
    ensure_wordnet()
    scorer = Meteor()
    scorer.score(["warm-up"], ["warm-up"])  # parses WordNet once for the session
    return scorer


@pytest.fixture(scope="session")
def rouge1() -> Rouge1:
    return Rouge1()


@pytest.fixture(scope="session")
def chrf() -> ChrF:
    return ChrF()
