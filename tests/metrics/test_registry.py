import pytest

from narrative_eval.metrics import AT_AVG_NAMES, METRICS, at_avg, get_metric, score_all
from narrative_eval.metrics.base import loaded_model_keys
from narrative_eval.records import MetricsSpec

CANDIDATES = [
    "Maria ran to the harbour. The boats were already gone.",
    "",
    "He closed the book and went to sleep.",
]
REFERENCES = [
    "Maria hurried to the docks, but the boats had left.",
    "The reference exists even when the candidate is empty.",
    "He shut the book and fell asleep.",
]


def test_registry_holds_the_five_metrics():
    assert set(METRICS) == set(AT_AVG_NAMES) == {"bertscore", "rouge1", "meteor", "chrf", "semf1"}
    for name, metric_class in METRICS.items():
        assert metric_class.name == name


def test_score_all_returns_every_metric_in_unit_range(metrics_spec, bertscore, semf1, meteor):
    scores = score_all(CANDIDATES, REFERENCES, metrics_spec)
    assert list(scores) == list(metrics_spec.names)
    for name, values in scores.items():
        assert len(values) == len(CANDIDATES), name
        assert all(0.0 <= value <= 1.0 for value in values), (name, values)
        assert values[1] == 0.0, name  # empty candidate
        assert values[0] > 0.0 and values[2] > 0.0, name
    # Paraphrases with shared words must beat an empty answer on every metric, and AtAvg averages the five.
    first = {name: values[0] for name, values in scores.items()}
    assert at_avg(first) == pytest.approx(sum(first.values()) / 5)


def test_score_all_batched_equals_one_by_one(metrics_spec, bertscore, semf1, meteor):
    batched = score_all(CANDIDATES, REFERENCES, metrics_spec)
    for i, (candidate, reference) in enumerate(zip(CANDIDATES, REFERENCES)):
        single = score_all([candidate], [reference], metrics_spec)
        for name in metrics_spec.names:
            assert single[name][0] == pytest.approx(batched[name][i], abs=1e-5), name


def test_score_all_respects_spec_names():
    spec = MetricsSpec(names=("rouge1", "chrf"))
    assert set(score_all(["a b"], ["a c"], spec)) == {"rouge1", "chrf"}


def test_models_load_once_per_process(metrics_spec, bertscore, semf1):
    score_all(CANDIDATES[:1], REFERENCES[:1], metrics_spec)
    before = loaded_model_keys()
    score_all(CANDIDATES[:1], REFERENCES[:1], metrics_spec)
    get_metric("bertscore", metrics_spec).score(["x"], ["y"])
    assert loaded_model_keys() == before
    assert len([key for key in before if key[0] == "bertscore"]) == 1


def test_at_avg_needs_all_five_and_ignores_extras():
    scores = {"bertscore": 0.9, "rouge1": 0.5, "meteor": 0.4, "chrf": 0.3, "semf1": 0.4, "extraction": 1.0}
    assert at_avg(scores) == pytest.approx((0.9 + 0.5 + 0.4 + 0.3 + 0.4) / 5)
    with pytest.raises(KeyError, match="semf1"):
        at_avg({"bertscore": 1.0, "rouge1": 1.0, "meteor": 1.0, "chrf": 1.0})


def test_mismatched_lengths_and_unknown_names_raise():
    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        get_metric("rouge1").score(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="unknown metric"):
        get_metric("bleu")
