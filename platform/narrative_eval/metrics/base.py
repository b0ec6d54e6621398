"""The scorer interface shared by every automatic metric (its declared range, version and weights), and the
per-process model cache."""

from __future__ import annotations

import math
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from narrative_eval.records import FIRST_VERSION, MetricsSpec
from narrative_eval.registry import Registry
from narrative_eval.weights import weights_identity

METRICS: Registry[type[Metric]] = Registry("metric", modules=("narrative_eval.metrics",))
"""Metric name -> scorer class; entries carry `in_at_avg` (whether AtAvg averages it) and `label` (its name in
tables and the app)."""

def weights_param(name: str) -> str:
    """The run param holding the identity of metric `name`'s weights."""
    return f"metric/{name}/weights"


UNIT_RANGE = (0.0, 1.0)
"""A metric's range unless it declares another."""

ROUNDING = 1e-6
"""How far past its range a value may fall and still count as the floating rounding of a bound (a cosine of two equal
unit vectors computes as 1.0000001): such a value is set to the bound; anything further is an error."""


class MetricRangeError(ValueError):
    """A metric computed a value outside the range it declares: its code is wrong, so the cell stops."""


def metric(name: str, *, in_at_avg: bool = False, label: str | None = None, range: tuple[float, float] = UNIT_RANGE):
    """Register a Metric subclass under `name` (its `name` attribute is set to match); `label` is how tables
    and the app name it (default: the name); `range` the values it can take (a value outside is an error)."""
    low, high = (float(bound) for bound in range)
    if not low < high:
        raise ValueError(f"metric {name!r}: range {range!r} must be (low, high) with low < high")

    def register(metric_class: type[Metric]) -> type[Metric]:
        metric_class.name = name
        metric_class.range = (low, high)
        METRICS.add(name, metric_class, in_at_avg=in_at_avg, label=label or name)
        return metric_class

    return register


def set_offline_defaults() -> None:
    """Keep model loading local: no metric may reach a model hub.

    setdefault leaves an explicit user choice alone.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    # Tokenizers would otherwise warn (and may deadlock) once a process forks after encoding.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


set_offline_defaults()

_model_cache: dict[tuple[Any, ...], Any] = {}
_model_cache_lock = threading.Lock()


def cached_model(key: tuple[Any, ...], load: Callable[[], Any]) -> Any:
    """Return the process-wide object for `key`, calling `load` only the first time.

    Keys start with the metric name and the resolved model path, so two metrics never share
    an entry by accident while two scorers of the same metric and model always do.
    """
    with _model_cache_lock:
        if key not in _model_cache:
            _model_cache[key] = load()
        return _model_cache[key]


def loaded_model_keys() -> list[tuple[Any, ...]]:
    """Keys of the models loaded so far in this process (for diagnostics and tests)."""
    with _model_cache_lock:
        return list(_model_cache)


def in_range(name: str, value: float, bounds: tuple[float, float]) -> float:
    """`value` checked against a metric's declared range: a MetricRangeError naming the metric and the value when it
    lies outside (or is not a number); a value past a bound by no more than ROUNDING is that bound."""
    low, high = bounds
    number = float(value)
    if not math.isfinite(number) or not low - ROUNDING <= number <= high + ROUNDING:
        raise MetricRangeError(f"metric {name!r} computed {number!r}, outside its declared range [{low:g}, {high:g}]; "
                               "its code is wrong (or its range is: @metric(..., range=(low, high)))")
    return min(high, max(low, number))


def is_blank(text: str | None) -> bool:
    """True for a missing or whitespace-only text, which is never passed to a metric's library."""
    return text is None or not text.strip()


def blank_score(bounds: tuple[float, float]) -> float:
    """What a blank candidate or reference scores: 0.0 on a metric whose range starts at 0 (nothing matches), NaN
    (no score) on one whose range holds 0.0 as an ordinary value (a correlation of −1 to 1), so a blank is never
    averaged in as a real middle score."""
    return 0.0 if bounds[0] == 0.0 else math.nan


class Metric(ABC):
    """One automatic metric: batched scoring of candidates against references, each score in its declared range."""

    name: ClassVar[str]
    """Registry name, also the key under which the score is logged (set by @metric)."""
    range: ClassVar[tuple[float, float]] = UNIT_RANGE
    """The values a score can take (set by @metric's `range`); a value outside is an error, never clipped."""
    model_path: str | None = None
    """The local weights a metric computes with (a model directory), whose identity its cells log; None for none."""
    version: ClassVar[int] = FIRST_VERSION
    """Version of the scoring code: raise it when a change gives other numbers, so finished cells become new cells
    instead of being skipped (`study.code_versions`; the first version leaves spec hashes as they were)."""

    @classmethod
    def from_spec(cls, spec: MetricsSpec) -> Metric:
        """Build the scorer configured by a cell's metrics spec (models stay cached per process)."""
        return cls()

    def load(self) -> None:
        """Load (once per process) and check the model this scorer computes with, so weights that did not load whole
        stop a cell before it generates anything; nothing for a metric without a model."""

    def run_params(self) -> dict[str, str]:
        """What identifies the weights this scorer uses (`weights_identity` of its `model_path`), logged as a run
        param `metric/<name>/weights`, so two runs that disagree can be told apart; none for a metric without a
        model."""
        return {} if self.model_path is None else {weights_param(self.name): weights_identity(self.model_path)}

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        """Score each candidate against the reference at the same position.

        A blank candidate or reference is never passed to the underlying library: it scores `blank_score`. Every
        other value must lie in the metric's range (`in_range`): a value outside stops the cell.
        """
        if len(candidates) != len(references):
            raise ValueError(
                f"{self.name}: {len(candidates)} candidates but {len(references)} references"
            )
        scores = [blank_score(self.range)] * len(candidates)
        kept = [i for i, (c, r) in enumerate(zip(candidates, references)) if not (is_blank(c) or is_blank(r))]
        if kept:
            values = self._score_nonblank([candidates[i] for i in kept], [references[i] for i in kept])
            for i, value in zip(kept, values, strict=True):
                scores[i] = in_range(self.name, value, self.range)
        return scores

    @abstractmethod
    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        """Scores for pairs whose texts are both non-blank."""
