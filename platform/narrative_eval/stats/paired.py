"""Paired comparisons between cells on the items both share, Holm-corrected per family.

Each cell's per-instance value is the mean over its seeds of the row value (stats.cell_scores.row_scores),
so the pairing unit is the instance and a difference d_i = a_i - b_i is taken per shared instance.
Δ = mean d; its interval and two-sided p-value come from a bootstrap that draws passages (every shared
instance of a drawn passage comes along). p = 2·min(P*(Δ* <= 0), P*(Δ* >= 0)), each share counted as
(k + 1) / (B + 1) so a p-value is never 0.

A comparison is undefined (NaN, with the reason and the count it had) when fewer than MIN_SHARED instances
are shared, or when the metric is missing on some rows of the shared instances (an unextracted answer,
a failed judgment): dropping those rows would silently compare a smaller, selected sample.

`paired_contrast` is the plain paired contrast of two conditions over matched pairs (no test, pairs where either
value is missing left out and counted): the incremental study's FULL - X effects and every multi-turn study's
default report use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.stats.bootstrap import DEFAULT_LEVEL, ClusterBootstrap, percentile_interval
from narrative_eval.stats.cell_scores import passage_of, row_judges, row_scores

pd = lazy_module("pandas")

MIN_SHARED = 10
"""Fewest shared instances a paired test runs on."""

PAIRED_N_BOOT = 1000
"""Resamples behind each paired Δ."""

PAIRED_SEED = 0
"""Fixed bootstrap seed, so a report is the same every time it is built."""

ALPHA = 0.05
"""Family-wise error rate: a difference holds when its Holm-adjusted p is below it."""

COLUMNS = ("n", "delta", "lo", "hi", "p", "p_holm", "holds", "se", "reason")
"""What every comparison row carries after its keys (se: the clustered standard error of Δ, for the MDE)."""


def compared_metrics(gens: pd.DataFrame) -> dict[str, str]:
    """Label -> row-score key of the metrics compared: AtAvg, and each judge's QAvg (`<judge>:qavg`)."""
    wanted = {"at_avg": "at_avg"}
    wanted.update({f"{judge}:qavg": judge_key(judge, "qavg") for judge in sorted(row_judges(gens))})
    return wanted


def clustered_se(d: np.ndarray, clusters: np.ndarray) -> float:
    """Standard error of mean(d) with passages as clusters: sqrt(C/(C-1) · Σ_c (S_c - n_c·d̄)²) / n."""
    n = d.size
    labels, codes = np.unique(clusters, return_inverse=True)
    if labels.size < 2:
        return float("nan")
    residual = np.bincount(codes, weights=d - d.mean())
    return float(np.sqrt(labels.size / (labels.size - 1) * np.sum(residual**2)) / n)


def paired_delta(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, *, n_boot: int = PAIRED_N_BOOT,
                 seed: int = PAIRED_SEED) -> dict[str, float]:
    """Δ = mean(a - b) over paired instances, its percentile interval, bootstrap p-value and clustered SE."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    reps = ClusterBootstrap(clusters, n_boot=n_boot, seed=seed).means(d)
    reps = reps[np.isfinite(reps)]
    lo, hi = percentile_interval(reps)
    share = min(np.sum(reps <= 0), np.sum(reps >= 0))
    p = min(1.0, 2.0 * (share + 1) / (reps.size + 1))
    return {"n": d.size, "delta": float(d.mean()), "lo": lo, "hi": hi, "p": p, "se": clustered_se(d, np.asarray(clusters))}


def holm(p_values: pd.Series) -> pd.Series:
    """Holm step-down adjusted p-values; undefined (NaN) p-values stay NaN and do not count in the family."""
    p = pd.to_numeric(p_values, errors="coerce")
    defined = p.dropna().sort_values()
    m = len(defined)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * defined.to_numpy()))
    return pd.Series(adjusted, index=defined.index).reindex(p.index)


@dataclass(frozen=True)
class CellValues:
    """One cell's values of one row score, per instance."""

    values: pd.Series
    """The mean over its seeds."""
    missing: pd.Series
    """How many of its rows lack a value."""
    rows: pd.Series
    """How many rows it has."""


def instance_values(cell: pd.DataFrame, key: str) -> CellValues:
    """Per instance: the mean over seeds of the row value, how many of its rows lack a value, and its rows."""
    scores = row_scores(cell)
    values = pd.Series(scores.get(key, np.full(len(cell), np.nan)))
    ids = cell["instance_id"].to_numpy()
    return CellValues(values.groupby(ids).mean(), values.isna().groupby(ids).sum().astype(int), values.groupby(ids).size())


def compare_cells(a: pd.DataFrame, b: pd.DataFrame, key: str, *, key_b: str | None = None, n_boot: int = PAIRED_N_BOOT,
                  seed: int = PAIRED_SEED) -> dict[str, object]:
    """One paired comparison of cell a's `key` against cell b's `key_b` (default: the same key)."""
    name = key if key_b in (None, key) else f"{key} or {key_b}"
    return compare_values(instance_values(a, key), instance_values(b, key_b or key), name, n_boot=n_boot, seed=seed)


def compare_values(a: CellValues, b: CellValues, name: str, *, n_boot: int = PAIRED_N_BOOT,
                   seed: int = PAIRED_SEED) -> dict[str, object]:
    """One paired comparison of two cells' per-instance values (`name`: what is compared, for the reason)."""
    shared = a.values.index.intersection(b.values.index)
    undefined = {"n": len(shared), "delta": np.nan, "lo": np.nan, "hi": np.nan, "p": np.nan, "se": np.nan}
    if len(shared) < MIN_SHARED:
        return {**undefined, "reason": f"only {len(shared)} shared instances (fewer than {MIN_SHARED})"}
    missing = int(a.missing[shared].sum() + b.missing[shared].sum())
    if missing:
        rows = int(a.rows[shared].sum() + b.rows[shared].sum())
        return {**undefined, "reason": f"{name} missing on {missing} of {rows} rows (unextracted or failed judgment)"}
    clusters = np.array([passage_of(i) for i in shared])
    result = paired_delta(a.values[shared].to_numpy(), b.values[shared].to_numpy(), clusters, n_boot=n_boot, seed=seed)
    return {**result, "reason": ""}


def _table(gens: pd.DataFrame, within: str, across: str, n_boot: int, seed: int) -> pd.DataFrame:
    """Every pair of `across` values inside each `within` group, for each compared metric; Holm per family."""
    rows = []
    metrics = compared_metrics(gens)
    for group, frame in gens.groupby(within, sort=True):
        cells = {name: cell for name, cell in frame.groupby(across, sort=True)}
        for label, key in metrics.items():
            # Each cell's values once, not once per pair it is in: a group of k cells has k(k-1)/2 pairs.
            values = {name: instance_values(cell, key) for name, cell in cells.items()}
            for name_a, name_b in combinations(sorted(cells), 2):
                result = compare_values(values[name_a], values[name_b], key, n_boot=n_boot, seed=seed)
                rows.append({within: group, "a": name_a, "b": name_b, "metric": label, **result})
    table = pd.DataFrame(rows, columns=[within, "a", "b", "metric", *COLUMNS])
    if table.empty:
        return table
    # A family is one group's comparisons on one metric (one model across settings, or one setting across models).
    return _adjusted(table, [within, "metric"])


def _adjusted(table: pd.DataFrame, family: list[str]) -> pd.DataFrame:
    """p_holm within each family, and holds = p_holm < ALPHA (empty where the comparison is undefined)."""
    table["p_holm"] = table.groupby(family, group_keys=False)["p"].apply(holm)
    table["holds"] = (table["p_holm"] < ALPHA).astype(object).where(table["p_holm"].notna())
    return table


def paired_settings(gens: pd.DataFrame, *, n_boot: int = PAIRED_N_BOOT, seed: int = PAIRED_SEED) -> pd.DataFrame:
    """Within each model, every two prompt settings: model, a, b, metric, n, delta, lo, hi, p, p_holm, holds, se, reason."""
    return _table(gens, "model", "setting", n_boot, seed)


def paired_models(gens: pd.DataFrame, *, n_boot: int = PAIRED_N_BOOT, seed: int = PAIRED_SEED) -> pd.DataFrame:
    """At each prompt setting, every two models: setting, a, b, metric, n, delta, lo, hi, p, p_holm, holds, se, reason."""
    return _table(gens, "setting", "model", n_boot, seed)


def paired_judges(gens: pd.DataFrame, *, n_boot: int = PAIRED_N_BOOT, seed: int = PAIRED_SEED) -> pd.DataFrame:
    """In each cell, every two judges' QAvg on the same outputs: model, setting, a, b (judges), metric, n, delta,
    lo, hi, p, p_holm (Holm within the cell), holds, se, reason."""
    judges = sorted(row_judges(gens))
    rows = []
    for (model, setting), cell in gens.groupby(["model", "setting"], sort=True):
        for judge_a, judge_b in combinations(judges, 2):
            result = compare_cells(cell, cell, judge_key(judge_a, "qavg"), key_b=judge_key(judge_b, "qavg"),
                                   n_boot=n_boot, seed=seed)
            rows.append({"model": model, "setting": setting, "a": judge_a, "b": judge_b, "metric": "qavg", **result})
    table = pd.DataFrame(rows, columns=["model", "setting", "a", "b", "metric", *COLUMNS])
    return table if table.empty else _adjusted(table, ["model", "setting"])


def letter_groups(order: list[str], different: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display (insert-and-absorb, Piepho 2004): items sharing a letter are not shown different.

    `order` lists the items best first (letters follow it); `different` holds the pairs whose difference holds.
    """
    columns: list[set[str]] = [set(order)] if order else []
    for pair in sorted(different, key=sorted):
        first, second = sorted(pair)
        split: list[set[str]] = []
        for column in columns:
            split += [column - {first}, column - {second}] if pair <= column else [column]
        # Absorb: a column inside another adds no information (keep the first of equal ones).
        columns = [c for k, c in enumerate(split)
                   if c and not any(c < o or (c == o and m < k) for m, o in enumerate(split) if m != k)]
    rank = {item: k for k, item in enumerate(order)}
    columns.sort(key=lambda c: min(rank[item] for item in c))
    symbols = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    letters = dict.fromkeys(order, "")
    for n, column in enumerate(columns):
        for item in column:
            letters[item] += symbols[n] if n < len(symbols) else f"[{n}]"
    return letters


def model_groups(gens: pd.DataFrame, by_model: pd.DataFrame) -> pd.DataFrame:
    """Per setting and metric, the models best first with their letter group from paired_models (a comparison
    that is undefined counts as not shown different; `undefined` says how many there were in the family)."""
    rows = []
    metrics = compared_metrics(gens)
    for setting, frame in gens.groupby("setting", sort=True):
        for label, key in metrics.items():
            means = {model: instance_values(cell, key).values.mean() for model, cell in frame.groupby("model", sort=True)}
            order = sorted(means, key=lambda m: (-means[m] if np.isfinite(means[m]) else np.inf, m))
            family = by_model[(by_model["setting"] == setting) & (by_model["metric"] == label)] if not by_model.empty else by_model
            different = {frozenset((r.a, r.b)) for r in family.itertuples() if r.holds is True}
            letters = letter_groups(order, different)
            undefined = int(family["p"].isna().sum()) if not family.empty else 0
            rows += [{"setting": setting, "metric": label, "model": m, "mean": means[m], "group": letters[m],
                      "undefined": undefined} for m in order]
    return pd.DataFrame(rows, columns=["setting", "metric", "model", "mean", "group", "undefined"])


def paired_contrast(reference: Sequence[float] | np.ndarray, other: Sequence[float] | np.ndarray,
                    boot: ClusterBootstrap, level: float = DEFAULT_LEVEL) -> dict[str, float | int]:
    """n (pairs where both values exist), the two means over them, delta = mean(reference - other) and its
    percentile interval under `boot` (built on the pairs' clusters: an item with all its seeds); NaN where no pair has
    both values."""
    reference = np.asarray(reference, dtype=float)
    other = np.asarray(other, dtype=float)
    valid = ~(np.isnan(reference) | np.isnan(other))
    diff = np.where(valid, reference - other, np.nan)
    lo, hi = percentile_interval(boot.means(diff), level) if valid.any() else (np.nan, np.nan)
    return {"n": int(valid.sum()),
            "reference": float(reference[valid].mean()) if valid.any() else np.nan,
            "other": float(other[valid].mean()) if valid.any() else np.nan,
            "delta": float(diff[valid].mean()) if valid.any() else np.nan, "lo": lo, "hi": hi}
