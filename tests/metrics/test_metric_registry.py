import pytest

from narrative_eval.metrics import METRICS, Metric, at_avg, at_avg_names, get_metric, metric, metric_names, score_all
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


@pytest.fixture
def word_overlap():
    """A metric registered for one test and removed after it."""

    @metric("word_overlap", in_at_avg=True)
    class WordOverlap(Metric):
        def _score_nonblank(self, candidates, references):
            return [len(set(c.split()) & set(r.split())) / len(set(r.split())) for c, r in zip(candidates, references)]

    yield WordOverlap
    METRICS.remove("word_overlap")


def test_a_registered_metric_is_scored_and_joins_atavg_when_flagged(word_overlap):
    assert word_overlap.name == "word_overlap" and METRICS.get("word_overlap") is word_overlap
    assert "word_overlap" in at_avg_names() and "word_overlap" in metric_names(MetricsSpec())
    assert metric_names(MetricsSpec(names=("chrf",))) == ("chrf",)
    scores = score_all(["a b c"], ["a b d"], MetricsSpec(names=("word_overlap", "rouge1")))
    assert scores["word_overlap"] == [pytest.approx(2 / 3)]
    values = {name: 0.5 for name in at_avg_names()} | {"word_overlap": 1.0}
    assert at_avg(values) == pytest.approx((0.5 * (len(values) - 1) + 1.0) / len(values))
    with pytest.raises(KeyError, match="missing word_overlap"):
        at_avg({name: 0.5 for name in at_avg_names() if name != "word_overlap"})


def test_score_all_returns_every_metric_in_unit_range(metrics_spec, bertscore, semf1, meteor):
    scores = score_all(CANDIDATES, REFERENCES, metrics_spec)
    assert list(scores) == list(metric_names(metrics_spec))
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
        for name in metric_names(metrics_spec):
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
    # One BERTScore model for this spec's weights (other tests of the same worker may have loaded copies elsewhere).
    path = get_metric("bertscore", metrics_spec).model_path
    assert len([key for key in before if key[0] == "bertscore" and key[1] == path]) == 1


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
