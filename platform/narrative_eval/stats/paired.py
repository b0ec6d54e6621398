"""A paired contrast between two conditions: the mean of reference - other over matched pairs, with an interval from
the cluster bootstrap (stats.bootstrap) that resamples whole clusters (an item with every seed and model of it).
The incremental study's FULL - X effects and every multi-turn study's default report use it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from narrative_eval.stats.bootstrap import DEFAULT_LEVEL, ClusterBootstrap, percentile_interval


def paired_contrast(reference: Sequence[float] | np.ndarray, other: Sequence[float] | np.ndarray,
                    boot: ClusterBootstrap, level: float = DEFAULT_LEVEL) -> dict[str, float | int]:
    """n (pairs where both values exist), the two means over them, delta = mean(reference - other) and its
    percentile interval under `boot` (built on the pairs' clusters); NaN where no pair has both values."""
    reference = np.asarray(reference, dtype=float)
    other = np.asarray(other, dtype=float)
    valid = ~(np.isnan(reference) | np.isnan(other))
    diff = np.where(valid, reference - other, np.nan)
    lo, hi = percentile_interval(boot.means(diff), level) if valid.any() else (np.nan, np.nan)
    return {"n": int(valid.sum()),
            "reference": float(reference[valid].mean()) if valid.any() else np.nan,
            "other": float(other[valid].mean()) if valid.any() else np.nan,
            "delta": float(diff[valid].mean()) if valid.any() else np.nan, "lo": lo, "hi": hi}


__all__ = ["paired_contrast"]
