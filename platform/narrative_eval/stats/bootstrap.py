"""Cluster (story) bootstrap, vectorised.

A resample draws clusters (tasks) with replacement and keeps every row (every model's pair) of
each drawn cluster. It is stored as a weight matrix W of shape (n_boot, n_clusters): W[b, c] is
how often cluster c was drawn in resample b (a multinomial draw, which is exactly the count
vector of n_clusters draws with replacement). A resampled mean is then
(W @ per-cluster sums) / (W @ per-cluster counts), so 10,000 resamples of ~1,000 rows cost two
small matrix-vector products. The same W serves every statistic, so all intervals of one
analysis come from the same resamples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_N_BOOT = 10_000
"""Resamples used by the study's intervals."""

DEFAULT_LEVEL = 0.95
"""Coverage of the percentile intervals."""


class ClusterBootstrap:
    """A fixed set of cluster resamples over the rows of one table."""

    def __init__(
        self,
        clusters: Sequence[Any] | np.ndarray,
        n_boot: int = DEFAULT_N_BOOT,
        seed: int = 0,
        strata: Sequence[Any] | np.ndarray | None = None,
    ):
        """`clusters` labels each row with its cluster (story id); with `strata` (genre per row),
        clusters are resampled within each stratum so every resample keeps each stratum's size."""
        labels = np.asarray(clusters, dtype=object)
        self.cluster_labels, self.codes = np.unique(labels.astype(str), return_inverse=True)
        """Distinct cluster labels (sorted) and each row's index into them."""
        self.n_rows = len(labels)
        self.n_clusters = len(self.cluster_labels)
        self.n_boot = n_boot
        rng = np.random.default_rng(seed)
        weights = np.zeros((n_boot, self.n_clusters), dtype=np.int64)
        if self.n_clusters == 0:
            self.weights = weights
            return
        if strata is None:
            groups = [np.arange(self.n_clusters)]
        else:
            row_strata = np.asarray(strata, dtype=object).astype(str)
            cluster_stratum: dict[int, str] = {}
            for code, stratum in zip(self.codes, row_strata):
                if cluster_stratum.setdefault(int(code), stratum) != stratum:
                    raise ValueError(f"cluster {self.cluster_labels[code]!r} spans several strata")
            by_stratum: dict[str, list[int]] = {}
            for code, stratum in cluster_stratum.items():
                by_stratum.setdefault(stratum, []).append(code)
            groups = [np.array(sorted(members)) for _, members in sorted(by_stratum.items())]
        for members in groups:
            m = len(members)
            weights[:, members] = rng.multinomial(m, np.full(m, 1.0 / m), size=n_boot)
        self.weights = weights
        """(n_boot, n_clusters) draw counts."""

    def row_weights(self) -> np.ndarray:
        """(n_boot, n_rows) weight of every row in every resample (rows of one cluster share it)."""
        return self.weights[:, self.codes]

    def _sums(self, values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sums = np.bincount(self.codes, weights=np.where(valid, values, 0.0), minlength=self.n_clusters)
        counts = np.bincount(self.codes, weights=valid.astype(float), minlength=self.n_clusters)
        return sums, counts

    def means(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Resampled means of `values` (one per row; NaN rows are left out). Shape (n_boot,)."""
        values = np.asarray(values, dtype=float)
        if values.shape != (self.n_rows,):
            raise ValueError(f"expected {self.n_rows} values, got shape {values.shape}")
        sums, counts = self._sums(values, ~np.isnan(values))
        with np.errstate(invalid="ignore", divide="ignore"):
            return (self.weights @ sums) / (self.weights @ counts)

    def ratio_of_means(self, numerator: Sequence[float] | np.ndarray, denominator: Sequence[float] | np.ndarray) -> np.ndarray:
        """Resampled mean(numerator) / mean(denominator), over rows where both are present."""
        num = np.asarray(numerator, dtype=float)
        den = np.asarray(denominator, dtype=float)
        valid = ~(np.isnan(num) | np.isnan(den))
        num_sums, _ = self._sums(num, valid)
        den_sums, _ = self._sums(den, valid)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (self.weights @ num_sums) / (self.weights @ den_sums)


def percentile_interval(replicates: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (undefined replicates, NaN or infinite, are ignored)."""
    replicates = np.asarray(replicates, dtype=float)
    replicates = replicates[np.isfinite(replicates)]
    if replicates.size == 0:
        return (float("nan"), float("nan"))
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(replicates, [tail, 100.0 - tail])
    return float(lo), float(hi)
