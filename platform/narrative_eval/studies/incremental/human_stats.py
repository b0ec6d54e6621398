"""Statistics of the incremental-delivery study's human validation (its Tables 5-9 and 11, appendix B.3).

Pointwise (several raters score responses 1-5 on the five writing dimensions, N/A allowed):
- reliability: ordinal Krippendorff's alpha over the raters x responses matrix, and over every two raters of
  the same response the exact-agreement share and mean absolute difference;
- alignment: Spearman's rho and MAE between a response's automated score (its score record) and its mean
  human rating, the interval from resampling the matched FULL/SHARDED pairs;
- paired effects: per-response aggregate of the raters (mean, median, or reviewer-centered mean: each
  rater's within-dimension mean subtracted first), pairs matched on (story_id, model), delta = FULL - X.

Pairwise (verdicts +2 ... -2 as a score of A over B; see stats.human_records):
- agreement of each rater with a reference rater on the primary orientation: directional agreement,
  quadratic-weighted kappa, exact agreement, Cohen's kappa on A-better/tie/B-better, mean absolute and
  severe (|difference| >= 3) disagreement;
- order consistency: share of cases whose primary and order-restored reversed verdicts agree in direction;
- atomic status stability (evidence-first judges): share of (case, response, requirement) whose status the judge
  gave the same in both presentation orders.

A statistic that cannot be computed is NaN with the reason in the row's `reason` column.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from narrative_eval.judges.agreement import cohen_kappa, krippendorff_alpha, spearman
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import interval_keys
from narrative_eval.stats.alt_test import EPSILON, MIN_OUTPUTS, alt_test_table
from narrative_eval.stats.bootstrap import DEFAULT_LEVEL, DEFAULT_N_BOOT, ClusterBootstrap, percentile_interval
from narrative_eval.stats.judge_reliability import length_controlled_win_rate
from narrative_eval.stats.ppi import AnchoredOutputs, human_rating, judge_score
from narrative_eval.studies.incremental.effects import pair_frame, responses_frame
from narrative_eval.studies.incremental.human_records import PAIRWISE_DIMENSIONS, EvidenceStatus, PairwiseVerdict, PointwiseRating
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.incremental.vocabulary import COMPARISON, PRIMARY, REVERSED

pd = lazy_module("pandas")

AGGREGATIONS: tuple[str, ...] = ("mean", "median", "centered")
"""How the raters of one response are combined."""


def _join(reasons: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(r for r in reasons if r))


# --------------------------------------------------------------------------- pointwise


def ratings_frame(ratings: Iterable[PointwiseRating]) -> pd.DataFrame:
    """One row per (record_id, rater) with the five dimensions (NaN = N/A)."""
    rows = [{"record_id": r.record_id, "rater": r.rater,
             **{d: np.nan if r.scores.get(d) is None else float(r.scores[d]) for d in QUALITY_FIELDS}} for r in ratings]
    return pd.DataFrame(rows, columns=["record_id", "rater", *QUALITY_FIELDS])


def _rater_pairs(frame: pd.DataFrame, dimension: str) -> np.ndarray:
    """|difference| of every two raters' valid ratings of the same response."""
    gaps = []
    for _, values in frame.dropna(subset=[dimension]).groupby("record_id")[dimension]:
        gaps.extend(abs(a - b) for a, b in itertools.combinations(values.to_numpy(dtype=float), 2))
    return np.asarray(gaps, dtype=float)


def pointwise_reliability(ratings: Iterable[PointwiseRating]) -> pd.DataFrame:
    """Per dimension: n_responses, n_ratings, ordinal_alpha, exact_agreement, mean_abs_disagreement, reason."""
    frame = ratings_frame(ratings)
    rows = []
    for dimension in QUALITY_FIELDS:
        valid = frame.dropna(subset=[dimension])
        matrix = valid.pivot(index="rater", columns="record_id", values=dimension)
        gaps = _rater_pairs(frame, dimension)
        reasons = []
        if valid["rater"].nunique() < 2:
            reasons.append(f"only {valid['rater'].nunique()} rater(s) with valid ratings")
        elif gaps.size == 0:
            reasons.append("no response rated by two raters")
        alpha = krippendorff_alpha(matrix.to_numpy(dtype=float).tolist(), "ordinal") if gaps.size else math.nan
        if gaps.size and math.isnan(alpha):
            reasons.append("no variation in the ratings (expected disagreement 0): alpha undefined")
        rows.append({
            "dimension": dimension,
            "n_responses": int(valid["record_id"].nunique()),
            "n_ratings": len(valid),
            "ordinal_alpha": alpha,
            "exact_agreement": float(np.mean(gaps == 0)) if gaps.size else math.nan,
            "mean_abs_disagreement": float(gaps.mean()) if gaps.size else math.nan,
            "reason": _join(reasons),
        })
    return pd.DataFrame(rows)


def response_scores(ratings: Iterable[PointwiseRating], aggregation: str = "mean") -> pd.DataFrame:
    """One row per rated response (record_id) with each dimension aggregated over its raters' valid ratings.

    `centered` subtracts each rater's mean of that dimension (over all their valid ratings) before averaging.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, not {aggregation!r}")
    frame = ratings_frame(ratings)
    if aggregation == "centered":
        frame[list(QUALITY_FIELDS)] -= frame.groupby("rater")[list(QUALITY_FIELDS)].transform("mean")
    how = "median" if aggregation == "median" else "mean"
    return frame.groupby("record_id", as_index=False)[list(QUALITY_FIELDS)].agg(how)


def human_pairs(ratings: Sequence[PointwiseRating], records: Sequence[ScoreRecord], comparison: str = COMPARISON,
                aggregation: str = "mean") -> pd.DataFrame:
    """Matched FULL/comparison pairs of rated responses (story_id, model): '<dim>_full', '<dim>_x' hold the
    human aggregate and 'auto_<dim>_full', 'auto_<dim>_x' the automated score of the same responses."""
    human = response_scores(ratings, aggregation)
    automated = responses_frame([r for r in records if r.record_id in set(human["record_id"])])
    frames = []
    for source, columns in (("human", human), ("auto", None)):
        frame = automated.copy()
        if columns is not None:
            frame = frame.drop(columns=list(QUALITY_FIELDS)).merge(columns, on="record_id")
        frame["judge"] = source  # one value per response, so pair_frame never refuses a judge panel
        frames.append(pair_frame(frame, comparison))
    auto = frames[1][["story_id", "model", *(f"{d}_{s}" for d in QUALITY_FIELDS for s in ("full", "x"))]]
    auto = auto.rename(columns={c: f"auto_{c}" for c in auto.columns if c not in ("story_id", "model")})
    return frames[0].merge(auto, on=["story_id", "model"])


def _pair_bootstrap(pairs: pd.DataFrame, n_boot: int, seed: int) -> ClusterBootstrap:
    """Resamples of the matched pairs (one cluster per pair)."""
    return ClusterBootstrap(pairs["story_id"].astype(str) + "\x1f" + pairs["model"].astype(str), n_boot=n_boot, seed=seed)


def _paired_delta(pairs: pd.DataFrame, dimension: str, boot: ClusterBootstrap, level: float) -> dict:
    full = pairs[f"{dimension}_full"].to_numpy(dtype=float)
    other = pairs[f"{dimension}_x"].to_numpy(dtype=float)
    valid = ~(np.isnan(full) | np.isnan(other))
    diff = np.where(valid, full - other, np.nan)
    if not valid.any():
        return {"n_pairs": 0, "full": math.nan, "x": math.nan, "delta": math.nan, "lo": math.nan, "hi": math.nan,
                "diff": diff[valid], "reason": "no matched pair with both responses rated"}
    lo, hi = percentile_interval(boot.means(diff), level) if valid.sum() >= 2 else (math.nan, math.nan)
    return {"n_pairs": int(valid.sum()), "full": float(full[valid].mean()), "x": float(other[valid].mean()),
            "delta": float(diff[valid].mean()), "lo": lo, "hi": hi, "diff": diff[valid],
            "reason": "one pair: no interval" if valid.sum() < 2 else ""}


def human_paired_effects(pairs: pd.DataFrame, comparison: str = COMPARISON, n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
                         level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per dimension: n_pairs, full, <comparison>, delta, lo, hi, n_full_better, n_tied, n_<comparison>_better,
    automated_delta (same pairs), reason."""
    boot = _pair_bootstrap(pairs, n_boot, seed)
    rows = []
    for dimension in QUALITY_FIELDS:
        effect = _paired_delta(pairs, dimension, boot, level)
        diff = effect.pop("diff")
        both = ~pairs[[f"{dimension}_full", f"{dimension}_x"]].isna().any(axis=1)
        auto = (pairs[f"auto_{dimension}_full"] - pairs[f"auto_{dimension}_x"])[both]
        rows.append({"dimension": dimension, **{k: effect[k] for k in ("n_pairs", "full")}, comparison: effect["x"],
                     **{k: effect[k] for k in ("delta", "lo", "hi")},
                     "n_full_better": int((diff > 1e-9).sum()), "n_tied": int((np.abs(diff) <= 1e-9).sum()),
                     f"n_{comparison}_better": int((diff < -1e-9).sum()),
                     "automated_delta": float(auto.mean()) if auto.notna().any() else math.nan, "reason": effect["reason"]})
    return pd.DataFrame(rows)


def human_aggregation(by_aggregation: dict[str, pd.DataFrame], n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
                      level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per dimension: median_delta, median_lo, median_hi, centered_delta, centered_lo, centered_hi, reason, from the
    pairs of human_pairs(..., aggregation='median') and (..., 'centered')."""
    rows = []
    for dimension in QUALITY_FIELDS:
        row: dict = {"dimension": dimension}
        reasons = []
        for name in ("median", "centered"):
            pairs = by_aggregation[name]
            effect = _paired_delta(pairs, dimension, _pair_bootstrap(pairs, n_boot, seed), level)
            row.update({f"{name}_delta": effect["delta"], **dict(zip(interval_keys(name), (effect["lo"], effect["hi"]),
                                                                    strict=True))})
            reasons.append(effect["reason"])
        rows.append({**row, "reason": _join(reasons)})
    return pd.DataFrame(rows)


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mid-ranks of each value within each resample, as if every row were repeated `weights[b]` times."""
    below = weights @ (values[None, :] < values[:, None]).T.astype(float)
    tied = weights @ (values[None, :] == values[:, None]).T.astype(float)
    return below + (tied + 1.0) / 2.0


def _resampled_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample (row of `weights`: how often each response is drawn), computed as the
    weighted Pearson correlation of weighted mid-ranks, which equals rho on the repeated rows; NaN when constant."""
    w = weights.astype(float)
    rx, ry = _weighted_ranks(x, w), _weighted_ranks(y, w)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - (w * rx).sum(axis=1, keepdims=True) / total
        dy = ry - (w * ry).sum(axis=1, keepdims=True) / total
        cov = (w * dx * dy).sum(axis=1)
        scale = np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
        return np.where(scale > 1e-12, cov / scale, np.nan)


def pointwise_alignment(pairs: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
                        level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per dimension: n_pairs, spearman, lo, hi, mae, n_responses, reason: automated score vs mean human rating of
    every response in a matched pair; the interval resamples the pairs (both responses of a drawn pair come along)."""
    long = pd.concat([pairs.assign(side=side) for side in ("full", "x")], ignore_index=True)
    boot = _pair_bootstrap(long, n_boot, seed)
    weights = boot.row_weights()
    rows = []
    for dimension in QUALITY_FIELDS:
        human = np.where(long["side"] == "full", long[f"{dimension}_full"], long[f"{dimension}_x"]).astype(float)
        auto = np.where(long["side"] == "full", long[f"auto_{dimension}_full"], long[f"auto_{dimension}_x"]).astype(float)
        valid = ~(np.isnan(human) | np.isnan(auto))
        n_pairs = int(pd.Series(boot.codes[valid]).nunique())
        rho = spearman(human[valid], auto[valid], n_boot=0).estimate if valid.sum() >= 3 else math.nan
        reason = "" if valid.sum() >= 3 else f"{int(valid.sum())} response(s) with both scores: Spearman needs 3"
        if valid.sum() >= 3 and math.isnan(rho):
            reason = "no variation in the human or the automated scores: Spearman undefined"
        lo, hi = (percentile_interval(_resampled_spearman(human[valid], auto[valid], weights[:, valid]), level)
                  if not math.isnan(rho) else (math.nan, math.nan))
        rows.append({"dimension": dimension, "n_pairs": n_pairs, "spearman": rho, "lo": lo, "hi": hi,
                     "mae": float(np.abs(human[valid] - auto[valid]).mean()) if valid.any() else math.nan,
                     "n_responses": int(valid.sum()), "reason": reason})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- pairwise


def oriented_verdicts(verdicts: Iterable[PairwiseVerdict]) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
    """{(rater, case_id): {order: {dimension: order-restored score}}} (primary orientation, +2 ... -2)."""
    table: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for v in verdicts:
        table.setdefault((v.rater, v.case_id), {})[v.order] = {d: v.restored(d) for d in PAIRWISE_DIMENSIONS}
    return table


def judges_of(verdicts: Sequence[PairwiseVerdict], known_judges: Iterable[str] = ()) -> set[str]:
    """Raters taken for judges: the given judge ids, and any rater that saw some case in both orders
    (a person sees each case once)."""
    orders: dict[tuple[str, str], set[str]] = {}
    for v in verdicts:
        orders.setdefault((v.rater, v.case_id), set()).add(v.order)
    return set(known_judges) | {rater for (rater, _), seen in orders.items() if len(seen) == 2}


def _direction(values: np.ndarray) -> np.ndarray:
    return np.sign(values).astype(int)


def agreement_row(reference: Sequence[int], other: Sequence[int]) -> dict:
    """Agreement of two raters' five-level scores (+2 ... -2) on the same cases."""
    a, b = np.asarray(reference, dtype=int), np.asarray(other, dtype=int)
    if a.size == 0:
        return {"n": 0, "directional_agreement": math.nan, "qwk": math.nan, "exact_agreement": math.nan,
                "collapsed_kappa": math.nan, "mean_abs_disagreement": math.nan, "severe_disagreement_rate": math.nan,
                "reason": "no case judged by both"}
    qwk = cohen_kappa(a.tolist(), b.tolist(), weights="quadratic", labels=[-2, -1, 0, 1, 2])
    collapsed = cohen_kappa(_direction(a).tolist(), _direction(b).tolist(), labels=[-1, 0, 1])
    reasons = [f"{name} undefined: chance agreement is total (no variation)"
               for name, value in (("qwk", qwk), ("collapsed_kappa", collapsed)) if math.isnan(value)]
    gaps = np.abs(a - b)
    return {"n": int(a.size), "directional_agreement": float(np.mean(_direction(a) == _direction(b))), "qwk": qwk,
            "exact_agreement": float(np.mean(gaps == 0)), "collapsed_kappa": collapsed,
            "mean_abs_disagreement": float(gaps.mean()), "severe_disagreement_rate": float(np.mean(gaps >= 3)),
            "reason": _join(reasons)}


def _primary(entry: dict[str, dict[str, int]]) -> dict[str, int]:
    """A rater's verdict on a case in the primary orientation: the primary one, else the order-restored reversed one."""
    return entry.get(PRIMARY) or entry[REVERSED]


def pairwise_agreement(verdicts: Sequence[PairwiseVerdict], reference: str) -> pd.DataFrame:
    """judge, dimension, n, directional_agreement, qwk, exact_agreement, collapsed_kappa, mean_abs_disagreement,
    severe_disagreement_rate, reason: every other rater against `reference` on the cases both judged."""
    table = oriented_verdicts(verdicts)
    raters = sorted({rater for rater, _ in table} - {reference})
    rows = []
    for rater in raters:
        cases = sorted(case for r, case in table if r == rater and (reference, case) in table)
        for dimension in PAIRWISE_DIMENSIONS:
            ref = [_primary(table[(reference, case)])[dimension] for case in cases]
            other = [_primary(table[(rater, case)])[dimension] for case in cases]
            rows.append({"judge": rater, "dimension": dimension, **agreement_row(ref, other)})
    return pd.DataFrame(rows, columns=["judge", "dimension", "n", "directional_agreement", "qwk", "exact_agreement",
                                       "collapsed_kappa", "mean_abs_disagreement", "severe_disagreement_rate", "reason"])


def order_consistency(verdicts: Sequence[PairwiseVerdict]) -> pd.DataFrame:
    """judge, dimension, n, n_consistent, order_restored_consistency, reason: for each rater with cases seen in both
    orders, the share whose primary and order-restored reversed verdicts have the same direction."""
    table = oriented_verdicts(verdicts)
    rows = []
    for rater in sorted({rater for rater, _ in table}):
        both = [entry for (r, _), entry in sorted(table.items()) if r == rater and len(entry) == 2]
        if not both:
            continue
        for dimension in PAIRWISE_DIMENSIONS:
            same = sum(np.sign(e[PRIMARY][dimension]) == np.sign(e[REVERSED][dimension]) for e in both)
            rows.append({"judge": rater, "dimension": dimension, "n": len(both), "n_consistent": int(same),
                         "order_restored_consistency": same / len(both), "reason": ""})
    return pd.DataFrame(rows, columns=["judge", "dimension", "n", "n_consistent", "order_restored_consistency", "reason"])


WIN_RATE_COLUMNS = ["judge", "dimension", "n", "full_mean_words", "sharded_mean_words", "win_rate", "lc_win_rate",
                    "lc_win_rate_lo", "lc_win_rate_hi", "length_slope", "reason"]


def win_rates(verdicts: Sequence[PairwiseVerdict], words: Mapping[str, tuple[int, int]], n_boot: int = DEFAULT_N_BOOT,
              seed: int = 0) -> pd.DataFrame:
    """Per rater and dimension, FULL's win rate over SHARDED, raw and length-controlled (Dubois et al. 2024: a
    logistic model on the length difference; stats.judge_reliability.length_controlled_win_rate), beside the two
    sides' mean lengths in words. A case's win is the mean over the orders it was judged in of 1 (FULL preferred),
    0.5 (a tie) or 0; `words` gives each case's (FULL, SHARDED) length in words."""
    table = oriented_verdicts(verdicts)
    rows = []
    for rater in sorted({rater for rater, _ in table}):
        cases = sorted(case for r, case in table if r == rater and case in words)
        full = [words[case][0] for case in cases]
        sharded = [words[case][1] for case in cases]
        for dimension in PAIRWISE_DIMENSIONS:
            wins = [float(np.mean([0.5 + 0.5 * np.sign(seen[dimension]) for seen in table[(rater, case)].values()]))
                    for case in cases]
            row = {"judge": rater, "dimension": dimension, "n": len(cases),
                   "full_mean_words": float(np.mean(full)) if cases else math.nan,
                   "sharded_mean_words": float(np.mean(sharded)) if cases else math.nan,
                   "win_rate": float(np.mean(wins)) if cases else math.nan}
            if len(cases) < 2:
                rows.append({**row, "lc_win_rate": math.nan, "lc_win_rate_lo": math.nan, "lc_win_rate_hi": math.nan,
                             "length_slope": math.nan, "reason": "fewer than two pairs: no length model"})
                continue
            lc = length_controlled_win_rate(wins, [a - b for a, b in zip(full, sharded, strict=True)], n_boot=n_boot,
                                            seed=seed)
            rows.append({**row, "lc_win_rate": lc.lc, "lc_win_rate_lo": lc.lo, "lc_win_rate_hi": lc.hi,
                         "length_slope": lc.length_slope, "reason": ""})
    return pd.DataFrame(rows, columns=WIN_RATE_COLUMNS)


def status_stability(evidence: Iterable[EvidenceStatus]) -> pd.DataFrame:
    """judge, n_items, n_stable, status_stability, reason: for each rater, over every (case, response, requirement)
    it gave a status for in both presentation orders, the share given the same status in both."""
    statuses: dict[tuple[str, str, str, str], dict[str, str]] = {}
    for e in evidence:
        statuses.setdefault((e.rater, e.case_id, e.record_id, e.constraint_id), {})[e.order] = e.status
    rows = []
    for rater in sorted({key[0] for key in statuses}):
        both = [seen for key, seen in statuses.items() if key[0] == rater and len(seen) == 2]
        stable = sum(seen[PRIMARY] == seen[REVERSED] for seen in both)
        rows.append({"judge": rater, "n_items": len(both), "n_stable": stable,
                     "status_stability": stable / len(both) if both else math.nan,
                     "reason": "" if both else "no requirement with a status in both orders"})
    return pd.DataFrame(rows, columns=["judge", "n_items", "n_stable", "status_stability", "reason"])


def response_of(record: ScoreRecord) -> str:
    """The response a score record judged: its id without the judge (ScoreRecord.make_id ends in /<judge>), so a
    judge panel's records of one reply share it; a record id of another form is its own response."""
    suffix = f"/{record.judge}"
    return record.record_id[: -len(suffix)] if record.record_id.endswith(suffix) else record.record_id


def anchored_responses(ratings: Sequence[PointwiseRating], records: Sequence[ScoreRecord], judge: str) -> AnchoredOutputs:
    """The responses `judge`'s score records judged, with their mean human rating (several raters of one response
    averaged, N/A left out) whichever judge's record id a rating names; per model and condition, clustered by story
    like the study's bootstrap."""
    response_by_id = {r.record_id: response_of(r) for r in records}
    human = response_scores(ratings)
    human["response"] = human["record_id"].map(response_by_id)
    human = human.groupby("response")[list(QUALITY_FIELDS)].mean().rename(columns=human_rating).reset_index()
    judged = [r for r in records if r.judge == judge]
    outputs = pd.DataFrame({
        "model": [r.model for r in judged], "condition": [r.condition for r in judged],
        "story_id": [r.story_id for r in judged], "response": [response_of(r) for r in judged],
        **{judge_score(d): [np.nan if r.quality.get(d) is None else float(r.quality[d]) for r in judged]
           for d in QUALITY_FIELDS},
    })
    outputs = outputs.merge(human, on="response", how="left")
    return AnchoredOutputs(judge, outputs, ("model", "condition"), tuple(QUALITY_FIELDS), "story_id")


def pointwise_ppi_table(ratings: Sequence[PointwiseRating], records: Sequence[ScoreRecord], judge: str) -> pd.DataFrame:
    """The human-validation report's `ppi_<judge>`: per model, condition and quality dimension (anchored_responses)."""
    return anchored_responses(ratings, records, judge).table()


def pointwise_alt_test_table(ratings: Sequence[PointwiseRating], records: Sequence[ScoreRecord], judge: str,
                             epsilon: float = EPSILON, min_outputs: int = MIN_OUTPUTS) -> pd.DataFrame:
    """The human-validation report's `alt_test_<judge>`: per quality dimension, the alternative annotator test
    (stats.alt_test) of the judge's score records against the raters of the same responses (N/A left out), whichever
    judge's record id a rating names."""
    response_by_id = {r.record_id: response_of(r) for r in records}
    human = ratings_frame(ratings)
    human["response"] = human["record_id"].map(response_by_id)
    judged = pd.DataFrame({"response": [response_of(r) for r in records if r.judge == judge],
                           **{d: [np.nan if r.quality.get(d) is None else float(r.quality[d])
                                  for r in records if r.judge == judge] for d in QUALITY_FIELDS}})
    return alt_test_table(human.dropna(subset=["response"]), judged, "response", list(QUALITY_FIELDS), epsilon,
                          min_outputs)
