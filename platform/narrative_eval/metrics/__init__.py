"""Automatic metrics for narrative infilling: BERTScore, ROUGE-1, METEOR, chrF, Sem-F1, and their mean (AtAvg).

Every metric scores a batch of candidates against references with values in [0, 1]; models load once
per process. Loading is offline (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE default to 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from narrative_eval.metrics.base import Metric, set_offline_defaults
from narrative_eval.metrics.bertscore import BertScore
from narrative_eval.metrics.chrf import ChrF
from narrative_eval.metrics.meteor import Meteor
from narrative_eval.metrics.rouge1 import Rouge1
from narrative_eval.metrics.semf1 import SemF1
from narrative_eval.records import MetricsSpec

set_offline_defaults()

METRICS: dict[str, type[Metric]] = {
    metric.name: metric for metric in (BertScore, Rouge1, Meteor, ChrF, SemF1)
}
"""Metric name -> scorer class."""

AT_AVG_NAMES: tuple[str, ...] = ("bertscore", "rouge1", "meteor", "chrf", "semf1")
"""The five metrics whose mean is AtAvg."""


def get_metric(name: str, spec: MetricsSpec | None = None) -> Metric:
    """A scorer for `name`, configured from `spec` (defaults when None)."""
    try:
        metric_class = METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; registered: {', '.join(METRICS)}") from None
    return metric_class.from_spec(spec or MetricsSpec())


def score_all(
    candidates: Sequence[str], references: Sequence[str], spec: MetricsSpec | None = None
) -> dict[str, list[float]]:
    """Every metric named in `spec` for each candidate/reference pair: name -> per-pair scores."""
    spec = spec or MetricsSpec()
    return {name: get_metric(name, spec).score(candidates, references) for name in spec.names}


def at_avg(scores: Mapping[str, float]) -> float:
    """AtAvg: the mean of the five automatic metrics (other keys are ignored)."""
    missing = [name for name in AT_AVG_NAMES if name not in scores]
    if missing:
        raise KeyError(f"AtAvg needs all five metrics; missing {', '.join(missing)}")
    return sum(float(scores[name]) for name in AT_AVG_NAMES) / len(AT_AVG_NAMES)


__all__ = [
    "AT_AVG_NAMES",
    "METRICS",
    "BertScore",
    "ChrF",
    "Meteor",
    "Metric",
    "Rouge1",
    "SemF1",
    "at_avg",
    "get_metric",
    "score_all",
]
