"""Automatic metrics of an answer against a reference: BERTScore, ROUGE-1, METEOR, chrF, Sem-F1, and their mean (AtAvg).

Every metric scores a batch of candidates against references with values in the range it declares ([0, 1] unless
`@metric(..., range=(low, high))` says otherwise; a value outside is an error, never clipped); models load once per
process, checked whole (`weights.loading`), and each metric logs the identity of the weights it used. Loading is
offline (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE default to 1). A metric is one file here with
`@metric(name, in_at_avg=..., label=...)` on its class, plus its import line below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Imported to register, in the order of the published tables (it is the order of columns and of a cell's metric list).
from narrative_eval.metrics import bertscore, rouge1, meteor, chrf, semf1  # noqa: F401, I001
from narrative_eval.metrics.base import METRICS, Metric, MetricRangeError, metric
from narrative_eval.records import MetricsSpec


AT_AVG = "at_avg"
"""The name AtAvg is logged under."""
AT_AVG_LABEL = "AtAvg"
"""How tables and the app name AtAvg (the registered metrics carry their own `label`)."""


def metric_label(name: str) -> str:
    """How the app names a registered metric or AtAvg (its registered name when it has no label)."""
    if name == AT_AVG:
        return AT_AVG_LABEL
    return str(METRICS.entry(name).meta.get("label") or name) if name in METRICS else name


def at_avg_names(computed: Sequence[str] | None = None) -> tuple[str, ...]:
    """The metrics whose mean is AtAvg (registered with in_at_avg=True); of those a cell `computed`, when given (a
    plugin's metric counts where it ran, and is no other cell's missing one)."""
    flagged = tuple(entry.name for entry in METRICS.entries() if entry.meta.get("in_at_avg"))
    return flagged if computed is None else tuple(name for name in flagged if name in computed)


def project_metrics() -> tuple[str, ...]:
    """The project's own metrics (a plugin's are not among them): what a study computes unless it declares its own."""
    return tuple(entry.name for entry in METRICS.entries() if not entry.plugin)


def metric_names(spec: MetricsSpec | None = None, default: Sequence[str] | None = None) -> tuple[str, ...]:
    """The metrics a spec asks for: its names, or when it names none the study's declared `default` (None: the
    project's own metrics)."""
    if spec is not None and spec.names is not None:
        return tuple(spec.names)
    return tuple(default) if default is not None else project_metrics()


def get_metric(name: str, spec: MetricsSpec | None = None) -> Metric:
    """A scorer for `name`, configured from `spec` (defaults when None)."""
    return METRICS.get(name).from_spec(spec or MetricsSpec())


def load_metrics(spec: MetricsSpec | None = None) -> dict[str, str]:
    """Load and check every model the metrics named in `spec` compute with (a `ModelLoadError` when one did not load
    whole), before anything is generated; their run params: the identity of the weights each one computes with
    (`metric/<name>/weights`), so two runs that disagree can be told apart."""
    params: dict[str, str] = {}
    for name in metric_names(spec):
        scorer = get_metric(name, spec)
        scorer.load()
        params.update(scorer.run_params())
    return params


def score_all(
    candidates: Sequence[str], references: Sequence[str], spec: MetricsSpec | None = None
) -> dict[str, list[float]]:
    """Every metric named in `spec` for each candidate/reference pair: name -> per-pair scores."""
    spec = spec or MetricsSpec()
    return {name: get_metric(name, spec).score(candidates, references) for name in metric_names(spec)}


def has_at_avg(computed: Sequence[str]) -> bool:
    """Whether a cell that computed these metrics has an AtAvg: it computed every AtAvg metric of the project's own."""
    return set(at_avg_names(project_metrics())) <= set(computed)


def at_avg(scores: Mapping[str, float], computed: Sequence[str] | None = None) -> float:
    """AtAvg: the mean of the AtAvg metrics (of those `computed`, when given; other keys are ignored); every one of
    them is required."""
    names = at_avg_names(computed)
    missing = [name for name in names if name not in scores]
    if missing:
        raise KeyError(f"AtAvg needs all of {', '.join(names)}; missing {', '.join(missing)}")
    return sum(float(scores[name]) for name in names) / len(names)


__all__ = ["AT_AVG", "AT_AVG_LABEL", "METRICS", "Metric", "MetricRangeError", "at_avg", "at_avg_names", "get_metric",
           "has_at_avg", "metric", "metric_label", "metric_names", "load_metrics", "project_metrics", "score_all"]
