"""Creative Integrity, ICIR and paired FULL - X effects, from score records.

Definitions (the incremental-delivery study):
- adherence A = mean of a response's checklist item scores (0, 0.5, 1);
- Creative Integrity CI = A * (S - 1) / 4, with S = structure/coherence (1-5);
- ICIR = 100 * mean CI(condition) / mean CI(full);
- paired effect = mean over matched pairs of X_full - X_condition, pairs matched on (story_id, model);
- d_av = (mean_full - mean_x) / sqrt((s_full^2 + s_x^2) / 2), sample SDs over the pairs.

Intervals come from the story-clustered bootstrap (stats.bootstrap): tasks are resampled with
replacement and every model's pair of a drawn task comes along. Model-specific intervals
resample that model's pairs. Characterization may be N/A; a pair counts for it only when both
responses have it.

Several records for the same (story_id, model, condition, judge) (repeated seeds) are averaged
into one response before pairing. Records from several judges for the same response (a judge
panel) are never averaged: pass `judge=` to pick one judge's records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import with_interval
from narrative_eval.stats.bootstrap import DEFAULT_LEVEL, DEFAULT_N_BOOT, ClusterBootstrap, percentile_interval
from narrative_eval.stats.paired import paired_contrast
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.incremental.vocabulary import COMPARISON, REFERENCE

pd = lazy_module("pandas")

QUALITY_DIMENSIONS: tuple[str, ...] = QUALITY_FIELDS
"""The five 1-5 writing-quality dimensions."""

DIMENSIONS: tuple[str, ...] = ("adherence",) + QUALITY_DIMENSIONS
"""Every dimension with a paired effect, in report order."""

RESPONSE_KEY: tuple[str, ...] = ("story_id", "genre", "model", "condition", "judge")
"""What identifies one judged response."""

PAIR_KEY: tuple[str, ...] = ("story_id", "model")
"""What matches a FULL response with its counterpart."""


# --------------------------------------------------------------------------- per-response values


def creative_integrity(adherence: float | np.ndarray, structure: float | np.ndarray) -> float | np.ndarray:
    """CI = A * (S - 1) / 4: high only when both adherence and structure/coherence are high."""
    value = np.asarray(adherence, dtype=float) * (np.asarray(structure, dtype=float) - 1.0) / 4.0
    return float(value) if value.ndim == 0 else value


def adherence_of(record: ScoreRecord) -> float:
    """Mean checklist item score of one record (NaN for an empty checklist)."""
    scores = [float(item["score"]) for item in record.adherence]
    return sum(scores) / len(scores) if scores else float("nan")


def icir(ci_condition: Sequence[float] | np.ndarray, ci_full: Sequence[float] | np.ndarray) -> float:
    """ICIR = 100 * mean CI(condition) / mean CI(full); NaN when FULL's mean CI is 0 (no integrity to retain)."""
    full = float(np.nanmean(np.asarray(ci_full, dtype=float)))
    if not np.isfinite(full) or full == 0.0:
        return float("nan")
    return 100.0 * float(np.nanmean(np.asarray(ci_condition, dtype=float))) / full


def d_av(full: Sequence[float] | np.ndarray, other: Sequence[float] | np.ndarray) -> float:
    """Standardized paired effect (mean_full - mean_other) / sqrt((s_full^2 + s_other^2) / 2) over pairs with both values."""
    full = np.asarray(full, dtype=float)
    other = np.asarray(other, dtype=float)
    valid = ~(np.isnan(full) | np.isnan(other))
    full, other = full[valid], other[valid]
    if full.size < 2:
        return float("nan")
    pooled = np.sqrt((full.var(ddof=1) + other.var(ddof=1)) / 2.0)
    if pooled == 0:
        return float("nan")
    return float((full.mean() - other.mean()) / pooled)


def responses_frame(records: Iterable[ScoreRecord]) -> pd.DataFrame:
    """One row per record: key columns, record_id, adherence, the five quality dimensions and ci."""
    rows = []
    for r in records:
        row = {
            "record_id": r.record_id,
            "story_id": r.story_id,
            "genre": r.genre,
            "model": r.model,
            "condition": r.condition,
            "judge": r.judge,
            "adherence": adherence_of(r),
        }
        for dim in QUALITY_DIMENSIONS:
            value = r.quality.get(dim)
            row[dim] = float(value) if value is not None else np.nan
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["record_id", *RESPONSE_KEY, *DIMENSIONS])
    frame["ci"] = creative_integrity(frame["adherence"], frame["structure_coherence"])
    return frame


def judges_per_response(responses: pd.DataFrame) -> int:
    """Most distinct judges that scored one response (1 for published-style files, >1 for a judge panel)."""
    if responses.empty:
        return 0
    return int(responses.groupby(["story_id", "model", "condition"])["judge"].nunique().max())


def primary_judge(responses: pd.DataFrame) -> str:
    """The judge with the most records (ties: first by name)."""
    counts = responses["judge"].value_counts()
    best = counts.max()
    return min(counts[counts == best].index)


def pair_frame(responses: pd.DataFrame, comparison: str = COMPARISON, judge: str | None = None) -> pd.DataFrame:
    """Matched FULL/comparison pairs on (story_id, model).

    Columns: story_id, genre, model, judge_full, judge_x, and for each dimension and ci
    '<dim>_full' and '<dim>_x'. Replicate records of one response are averaged first.
    """
    frame = responses[responses["condition"].isin([REFERENCE, comparison])]
    if judge is not None:
        frame = frame[frame["judge"] == judge]
    if judges_per_response(frame) > 1:
        raise ValueError("several judges scored the same response; choose one with judge= (scores are never averaged across judges)")
    values = [*DIMENSIONS, "ci"]
    collapsed = frame.groupby(list(RESPONSE_KEY), as_index=False, dropna=False)[values].mean()
    full = collapsed[collapsed["condition"] == REFERENCE].drop(columns="condition")
    other = collapsed[collapsed["condition"] == comparison].drop(columns="condition")
    pairs = full.merge(other, on=list(PAIR_KEY), suffixes=("_full", "_x"))
    pairs = pairs.rename(columns={"genre_full": "genre"}).drop(columns="genre_x")
    return pairs.sort_values(list(PAIR_KEY)).reset_index(drop=True)


# --------------------------------------------------------------------------- tables


def paired_effects(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per dimension: n, mean full, mean comparison, delta = mean(full - x) and its story-clustered interval."""
    boot = ClusterBootstrap(pairs["story_id"], n_boot=n_boot, seed=seed)
    rows = []
    for dim in DIMENSIONS:
        contrast = paired_contrast(pairs[f"{dim}_full"], pairs[f"{dim}_x"], boot, level)
        rows.append({"dimension": dim, "n": contrast["n"], "full": contrast["reference"], "x": contrast["other"],
                     "delta": contrast["delta"], "lo": contrast["lo"], "hi": contrast["hi"]})
    return pd.DataFrame(rows)


def paired_effects_by_model(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """paired_effects for each model separately (each model's intervals resample its own pairs)."""
    frames = []
    for model, group in pairs.groupby("model", sort=True):
        table = paired_effects(group, n_boot=n_boot, seed=seed, level=level)
        table.insert(0, "model", model)
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _icir_row(label: str, group: pd.DataFrame, n_boot: int, seed: int, level: float) -> dict:
    boot = ClusterBootstrap(group["story_id"], n_boot=n_boot, seed=seed)
    lo, hi = percentile_interval(100.0 * boot.ratio_of_means(group["ci_x"], group["ci_full"]), level)
    return {
        "model": label,
        "n_pairs": len(group),
        "full_ci": float(group["ci_full"].mean()),
        "x_ci": float(group["ci_x"].mean()),
        **dict(zip(with_interval("icir"), (icir(group["ci_x"], group["ci_full"]), lo, hi), strict=True)),
    }


def icir_table(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """One row per model (its own pairs resampled) and a last row 'ALL' (tasks resampled with all their models)."""
    rows = [_icir_row(str(model), group, n_boot, seed, level) for model, group in pairs.groupby("model", sort=True)]
    rows.append(_icir_row("ALL", pairs, n_boot, seed, level))
    return pd.DataFrame(rows)


def equal_adherence_mask(pairs: pd.DataFrame) -> np.ndarray:
    """Pairs whose two responses have identical observed adherence."""
    return np.isclose(pairs["adherence_full"].to_numpy(dtype=float), pairs["adherence_x"].to_numpy(dtype=float), rtol=0.0, atol=1e-9)


def equal_adherence(pairs: pd.DataFrame) -> pd.DataFrame:
    """Quality effects over all pairs and over the equal-adherence pairs (dimension, all_pairs_delta, equal_adherence_delta, n_pairs)."""
    mask = equal_adherence_mask(pairs)
    rows = []
    for dim in QUALITY_DIMENSIONS:
        diff = pairs[f"{dim}_full"].to_numpy(dtype=float) - pairs[f"{dim}_x"].to_numpy(dtype=float)
        subset = diff[mask]
        subset = subset[~np.isnan(subset)]
        rows.append(
            {
                "dimension": dim,
                "all_pairs_delta": float(np.nanmean(diff)) if (~np.isnan(diff)).any() else np.nan,
                "equal_adherence_delta": float(subset.mean()) if subset.size else np.nan,
                "n_pairs": int(subset.size),
            }
        )
    return pd.DataFrame(rows)


def equal_genre(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Effects with every genre weighted equally: the mean of the genre-mean deltas.

    Tasks are resampled within their genre, so every resample keeps each genre's task count.
    """
    boot = ClusterBootstrap(pairs["story_id"], n_boot=n_boot, seed=seed, strata=pairs["genre"])
    genres = sorted(pairs["genre"].unique())
    rows = []
    for dim in DIMENSIONS:
        diff = pairs[f"{dim}_full"].to_numpy(dtype=float) - pairs[f"{dim}_x"].to_numpy(dtype=float)
        point, replicates = [], []
        for genre in genres:
            in_genre = (pairs["genre"] == genre).to_numpy()
            values = np.where(in_genre, diff, np.nan)
            if np.isnan(values).all():
                continue
            point.append(np.nanmean(values))
            replicates.append(boot.means(values))
        delta = float(np.mean(point)) if point else np.nan
        lo, hi = percentile_interval(np.mean(replicates, axis=0), level) if replicates else (np.nan, np.nan)
        rows.append({"dimension": dim, "delta": delta, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def same_judge(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """paired_effects restricted to pairs whose two responses were scored by the same judge."""
    return paired_effects(pairs[pairs["judge_full"] == pairs["judge_x"]].reset_index(drop=True), n_boot, seed, level)


def model_d_av(pairs: pd.DataFrame) -> pd.DataFrame:
    """d_av per model and dimension (model, dimension, d_av)."""
    rows = []
    for model, group in pairs.groupby("model", sort=True):
        for dim in DIMENSIONS:
            rows.append({"model": model, "dimension": dim, "d_av": d_av(group[f"{dim}_full"], group[f"{dim}_x"])})
    return pd.DataFrame(rows, columns=["model", "dimension", "d_av"])
