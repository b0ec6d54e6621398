"""Which outputs people should rate next: strata by the judge's uncertainty, more ratings where it is largest.

A cell's outputs are cut into strata at the quantiles of the judge's uncertainty about each (its spread across
repeated judging where the sweep has it, else the disagreement between judges, else how far its score sits from the
middle of its own score distribution: whoever computes it, a larger number means less certain). A rating budget is
shared between the strata in proportion to N_h (u_h + u) (two at least, so each has an interval), u_h the stratum's mean uncertainty and u the cell's (the
Neyman allocation with the judge's uncertainty for the spread of people's disagreement with it, half of it kept
even where the judge is sure, since people disagree with each other there too). Each stratum's outputs come in a
random order, and the strata are interleaved so that any prefix of the order is shared as the budget is: a rater
who stops early leaves every stratum with a uniform random subset rated, which is what the stratified PPI estimate
(stats.ppi.stratified_mean) needs to stay unbiased. An output's probability of being rated within the budget is
n_h / N_h; its inverse, N_h / n_h, is the weight its rating carries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from narrative_eval.lazy import lazy_module

pd = lazy_module("pandas")

STRATA = 3
"""Strata per cell by default (the judge's uncertainty cut at its terciles)."""


def uncertainty_strata(uncertainty: Sequence[float] | np.ndarray, strata: int = STRATA) -> np.ndarray:
    """Each output's stratum, 0 (the judge most certain) to strata - 1, cut at the uncertainty's quantiles; ties
    stay together, so a cell with fewer distinct values has fewer strata. NaN uncertainty: the middle stratum."""
    values = np.asarray(uncertainty, dtype=float)
    known = values[~np.isnan(values)]
    if known.size == 0:
        return np.zeros(values.size, dtype=int)
    edges = np.unique(np.quantile(known, np.linspace(0, 1, strata + 1)[1:-1]))
    labels = np.searchsorted(edges, values, side="left")
    return np.where(np.isnan(values), min(strata // 2, edges.size), labels).astype(int)


def allocation(uncertainty: np.ndarray, labels: np.ndarray, budget: int) -> dict[int, int]:
    """Ratings per stratum for a budget: proportional to N_h (u_h + u), at least two per stratum (a stratum's interval
    needs two), at most N_h."""
    present = np.unique(labels)
    overall = float(np.nanmean(uncertainty)) if np.isfinite(uncertainty).any() else 1.0
    sizes = np.array([(labels == h).sum() for h in present], dtype=float)
    means = np.array([np.nanmean(uncertainty[labels == h]) if np.isfinite(uncertainty[labels == h]).any() else overall
                      for h in present])
    score = sizes * (means + overall + 1e-12)
    share = np.minimum(sizes, np.maximum(2.0, np.round(budget * score / score.sum())))
    return {int(h): int(n) for h, n in zip(present, share)}


def rate_next_order(uncertainty: Sequence[float] | np.ndarray, budget: int, seed: int = 0,
                    strata: int = STRATA) -> pd.DataFrame:
    """The order to rate a cell's outputs in: one row per output (position = its index in `uncertainty`), in rating
    order, with columns position, stratum, planned (the stratum's share of the budget, n_h), stratum_size (N_h) and
    probability (n_h / N_h, the chance an output is rated within the budget). The order runs past the budget through
    every output, still interleaved, so more ratings keep each stratum a uniform random subset."""
    values = np.asarray(uncertainty, dtype=float)
    labels = uncertainty_strata(values, strata)
    planned = allocation(values, labels, max(int(budget), 1))
    rng = np.random.default_rng(seed)
    rows = []
    for stratum, n_h in planned.items():
        members = rng.permutation(np.nonzero(labels == stratum)[0])
        for rank, position in enumerate(members):
            rows.append({"position": int(position), "stratum": stratum, "planned": n_h, "stratum_size": members.size,
                         "probability": n_h / members.size, "key": (rank + 0.5) / n_h})
    order = pd.DataFrame(rows).sort_values(["key", "stratum"], kind="stable").drop(columns="key")
    return order.reset_index(drop=True)


__all__ = ["STRATA", "allocation", "rate_next_order", "uncertainty_strata"]
