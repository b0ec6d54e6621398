"""The cell plumbing both studies share: batches, means, per-seed aggregation, a judge's summary metrics."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from narrative_eval.judges import summarize
from narrative_eval.records import JudgeResult

T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """`items` cut into consecutive lists of at most `size`."""
    size = max(1, int(size))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def mean_or_nan(values: Iterable[float]) -> float:
    """The mean, or NaN for no values."""
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def aggregate_seeds(summaries: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """Per-seed values as 'seed<k>/<key>', plus their mean '<key>' and SD '<key>_sd' across seeds (NaNs left out)."""
    metrics: dict[str, float] = {}
    for key in sorted({k for s in summaries.values() for k in s}):
        for seed, summary in summaries.items():
            if key in summary:
                metrics[f"seed{seed}/{key}"] = summary[key]
        values = [s[key] for s in summaries.values() if key in s and s[key] == s[key]]
        if values:
            metrics[key] = statistics.fmean(values)
            metrics[f"{key}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
    return metrics


def judge_metrics(judge_id: str, results: Sequence[JudgeResult]) -> dict[str, float]:
    """One judge's summary (judges.summarize) under 'judge/<id>/...', NaN failure rate when nothing was judged."""
    summary = summarize(results) if results else {"failure_rate": float("nan")}
    return {f"judge/{judge_id}/{key}": value for key, value in summary.items()}
