"""Per-row scores of a cell's table (one row per item and seed) and the cell's bootstrap intervals.

A cell's headline number is, per seed, the mean over the rows that have a value, then the mean across seeds
(evaluation.seed_metrics). A resample draws the rows' clusters (the passages of instances, the stories) with
replacement, every row of a drawn cluster with all its seeds, and recomputes that same statistic, so the interval
belongs to the number that is logged. AtAvg is the mean of its metrics' resampled means, as the logged AtAvg is
the mean of the metric means.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from narrative_eval.judges.judge import HIGH_QUALITY_THRESHOLD
from narrative_eval.lazy import lazy_module
from narrative_eval.metrics import METRICS, at_avg_names, has_at_avg
from narrative_eval.records.keys import interval_keys, judge_key, parse_judge_key
from narrative_eval.stats.bootstrap import ClusterBootstrap, percentile_interval

pd = lazy_module("pandas")

CELL_N_BOOT = 1000
"""Resamples behind a cell's interval (modest: a sweep logs one interval per metric per cell)."""

CELL_BOOT_SEED = 0
"""Fixed seed, so a cell's interval is the same every time it is computed."""

JUDGE_ROW_FIELDS = frozenset({"status", "qavg", "raw", "error"})
"""Per-judge row columns that are not rubric dimensions."""


def passage_of(instance_id: str) -> str:
    """The passage an instance was cut from: instance ids are dataset/ref_id/unit_idx/n."""
    return str(instance_id).rsplit("/", 2)[0]


def row_judges(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Judge id -> its rubric dimensions, as found in a generations table's columns."""
    judges: dict[str, list[str]] = {}
    for column in frame.columns:
        parsed = parse_judge_key(str(column))
        if parsed is not None:
            judges.setdefault(parsed[0], [])
            if parsed[1] not in JUDGE_ROW_FIELDS:
                judges[parsed[0]].append(parsed[1])
    return judges


def row_scores(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-row value of every cell statistic the table supports, NaN where a row has none.

    Keys are the logged metric names: each registered metric, `at_avg` (the row mean of the AtAvg metrics the
    table has, none unless it has the project's own), and per judge `judge/<id>/<dimension>`, `judge/<id>/qavg` and
    `judge/<id>/high_pct` (100 when the row's QAvg is above 4, else 0); a failed judgment has no judge values.
    """
    scores: dict[str, np.ndarray] = {}
    for name in METRICS.names():
        if name in frame:
            scores[name] = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
    if has_at_avg(list(scores)):
        scores["at_avg"] = np.mean([scores[name] for name in at_avg_names(list(scores))], axis=0)
    for judge, dimensions in row_judges(frame).items():
        status = judge_key(judge, "status")
        ok = (frame[status] == "ok").to_numpy() if status in frame else np.ones(len(frame), bool)
        for field in (*dimensions, "qavg"):
            if judge_key(judge, field) in frame:
                values = pd.to_numeric(frame[judge_key(judge, field)], errors="coerce").to_numpy(dtype=float)
                scores[judge_key(judge, field)] = np.where(ok, values, np.nan)
        if judge_key(judge, "qavg") in scores:
            quality = scores[judge_key(judge, "qavg")]
            scores[judge_key(judge, "high_pct")] = np.where(np.isnan(quality), np.nan, 100.0 * (quality > HIGH_QUALITY_THRESHOLD))
    return scores


def seed_averaged_replicates(boot: ClusterBootstrap, values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Resampled (mean over rows with a value, per seed) averaged across seeds; shape (n_boot,)."""
    per_seed = [boot.means(np.where(seeds == seed, values, np.nan)) for seed in np.unique(seeds)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample where no seed has a value stays NaN
        return np.nanmean(np.vstack(per_seed), axis=0)


def cell_intervals(
    rows: pd.DataFrame | list[Mapping], wanted: set[str] | None = None, *, clusters: Sequence[str] | None = None,
    n_boot: int = CELL_N_BOOT, seed: int = CELL_BOOT_SEED, level: float = 0.95,
) -> dict[str, float]:
    """`<name>_lo` and `<name>_hi` of every statistic in `wanted` (default: all the rows support), from a
    clustered bootstrap of a cell's rows: `clusters` gives each row's cluster (rows of one are drawn together;
    default: the passage of its `instance_id`). A statistic with values on fewer than two clusters gets no
    interval (it is left out, not set to a guess)."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if frame.empty or (clusters is None and "instance_id" not in frame):
        return {}
    scores = row_scores(frame)
    seeds = frame["seed"].to_numpy() if "seed" in frame else np.zeros(len(frame))
    clusters = np.asarray(clusters if clusters is not None else frame["instance_id"].map(passage_of), dtype=object)
    boot = ClusterBootstrap(clusters, n_boot=n_boot, seed=seed)
    replicates = {name: seed_averaged_replicates(boot, values, seeds) for name, values in scores.items()
                  if name != "at_avg" and np.unique(clusters[~np.isnan(values)]).size >= 2}
    if has_at_avg(list(replicates)):
        # Like the logged AtAvg: the mean of the metric means, resample by resample.
        replicates["at_avg"] = np.mean([replicates[name] for name in at_avg_names(list(replicates))], axis=0)
    intervals: dict[str, float] = {}
    for name, reps in replicates.items():
        if wanted is not None and name not in wanted:
            continue
        lo, hi = percentile_interval(reps, level)
        if np.isfinite(lo) and np.isfinite(hi):
            low, high = interval_keys(name)
            intervals[low], intervals[high] = lo, hi
    return intervals


def group_intervals(frame: pd.DataFrame, value: str, by: list[str], *, n_boot: int = CELL_N_BOOT,
                    seed: int = CELL_BOOT_SEED, level: float = 0.95) -> pd.DataFrame:
    """Per group of `by`: mean of `value` over its rows with one, and lo, hi from a bootstrap over the group's
    passages (NaN without instance ids or with fewer than two passages); columns *by, mean, lo, hi."""
    rows = []
    for keys, group in frame.groupby(by, sort=True):
        values = pd.to_numeric(group[value], errors="coerce").to_numpy(dtype=float)
        lo = hi = float("nan")
        if "instance_id" in group:
            clusters = group["instance_id"].map(passage_of).to_numpy()
            if np.unique(clusters[~np.isnan(values)]).size >= 2:
                lo, hi = percentile_interval(ClusterBootstrap(clusters, n_boot=n_boot, seed=seed).means(values), level)
        mean = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
        rows.append({**dict(zip(by, keys if isinstance(keys, tuple) else (keys,))), "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=[*by, "mean", "lo", "hi"])
