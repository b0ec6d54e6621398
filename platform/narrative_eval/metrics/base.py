"""The scorer interface shared by every automatic metric, and the per-process model cache."""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from narrative_eval.records import MetricsSpec
from narrative_eval.registry import Registry

METRICS: Registry[type[Metric]] = Registry("metric", modules=("narrative_eval.metrics",))
"""Metric name -> scorer class; entries carry `in_at_avg` (whether AtAvg averages it) and `label` (its name in
tables and the app)."""


def metric(name: str, *, in_at_avg: bool = False, label: str | None = None):
    """Register a Metric subclass under `name` (its `name` attribute is set to match); `label` is how tables
    and the app name it (default: the name)."""

    def register(metric_class: type[Metric]) -> type[Metric]:
        metric_class.name = name
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


def clip_unit(value: float) -> float:
    """Clamp a score into [0, 1] (cosine-based scores can dip below 0 or round above 1)."""
    return min(1.0, max(0.0, float(value)))


def is_blank(text: str | None) -> bool:
    """True for a missing or whitespace-only text, which scores 0.0 against anything."""
    return text is None or not text.strip()


class Metric(ABC):
    """One automatic metric: batched scoring of candidates against references, each score in [0, 1]."""

    name: ClassVar[str]
    """Registry name, also the key under which the score is logged (set by @metric)."""

    @classmethod
    def from_spec(cls, spec: MetricsSpec) -> Metric:
        """Build the scorer configured by a cell's metrics spec (models stay cached per process)."""
        return cls()

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        """Score each candidate against the reference at the same position.

        A blank candidate or reference scores 0.0 and is never passed to the underlying library.
        """
        if len(candidates) != len(references):
            raise ValueError(
                f"{self.name}: {len(candidates)} candidates but {len(references)} references"
            )
        scores = [0.0] * len(candidates)
        kept = [i for i, (c, r) in enumerate(zip(candidates, references)) if not (is_blank(c) or is_blank(r))]
        if kept:
            values = self._score_nonblank([candidates[i] for i in kept], [references[i] for i in kept])
            for i, value in zip(kept, values, strict=True):
                scores[i] = clip_unit(value)
        return scores

    @abstractmethod
    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        """Scores for pairs whose texts are both non-blank."""
