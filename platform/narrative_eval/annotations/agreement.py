"""How far human ratings agree with an LLM judge, and with each other (the studies' judge validation)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from narrative_eval.annotations.store import AnnotationItem, AnnotationStore
from narrative_eval.judges.agreement import cohen_kappa, exact_agreement, krippendorff_alpha, mae, spearman
from narrative_eval.records import finite_number
from narrative_eval.records.keys import with_interval


def _judge_dimension(item: AnnotationItem, output: int, judge_id: str, dimension: str) -> float | None:
    if output >= len(item.judge_scores):
        return None
    return finite_number(item.judge_scores[output].get(judge_id, {}).get(dimension))


def judge_ids(store: AnnotationStore, study: str | None = None) -> list[str]:
    """Judges whose scores were captured with the stored items (of one study when given)."""
    found: set[str] = set()
    for item in store.items(study=study):
        for scores in item.judge_scores:
            found.update(scores)
    return sorted(found)


def pointwise_agreement(
    store: AnnotationStore, judge_id: str, dimensions: Iterable[str], scale: Sequence[int] = (1, 2, 3, 4, 5),
    study: str | None = None,
) -> list[dict[str, Any]]:
    """Per dimension: human vs judge on the same outputs (quadratic-weighted kappa, Spearman, MAE, exact agreement).

    Every (rater, item) pair counts once; items the judge failed on and N/A ratings are left out.
    """
    items = {item.item_id: item for item in store.items("pointwise", study)}
    ratings = [r for r in store.ratings(kind="pointwise") if r.item_id in items]
    rows = []
    for dimension in dimensions:
        human = [finite_number(r.scores.get(dimension)) for r in ratings]
        judge = [_judge_dimension(items[r.item_id], 0, judge_id, dimension) for r in ratings]
        n = sum(h is not None and j is not None for h, j in zip(human, judge))
        # Judges may give non-integer scores; kappa needs categories, so they are rounded onto the scale.
        judge_cat = [None if j is None else int(min(max(round(j), min(scale)), max(scale))) for j in judge]
        human_cat = [None if h is None else int(h) for h in human]
        rho = spearman(human, judge, n_boot=500) if n >= 3 else None
        rows.append({
            "dimension": dimension,
            "n": n,
            "kappa_quadratic": cohen_kappa(human_cat, judge_cat, weights="quadratic", labels=list(scale)) if n else math.nan,
            **dict(zip(with_interval("spearman"), (rho.estimate, rho.low, rho.high) if rho else (math.nan,) * 3,
                       strict=True)),
            "mae": mae(human, judge) if n else math.nan,
            "exact": exact_agreement(human_cat, judge_cat) if n else math.nan,
        })
    return rows


def judge_preference(item: AnnotationItem, judge_id: str, dimensions: Sequence[str]) -> int | None:
    """The judge's implied preference between an item's two outputs: sign of the difference of mean scores."""
    means = []
    for output in (0, 1):
        values = [_judge_dimension(item, output, judge_id, d) for d in dimensions]
        values = [v for v in values if v is not None]
        if not values:
            return None
        means.append(sum(values) / len(values))
    difference = means[0] - means[1]
    return 0 if abs(difference) < 1e-9 else (1 if difference > 0 else -1)


def pairwise_agreement(store: AnnotationStore, judge_id: str, dimensions: Sequence[str],
                       study: str | None = None) -> dict[str, Any]:
    """Direction of human preferences vs the judge's implied preferences: exact agreement and Cohen's kappa
    over {prefers first, tie, prefers second}, plus the share of non-tied pairs where both pick the same output."""
    items = {item.item_id: item for item in store.items("pairwise", study)}
    human, judge = [], []
    for rating in store.ratings(kind="pairwise"):
        item = items.get(rating.item_id)
        if item is None or rating.preference is None:
            continue
        human.append((rating.preference > 0) - (rating.preference < 0))
        judge.append(judge_preference(item, judge_id, dimensions))
    n = sum(j is not None for j in judge)
    decided = [(h, j) for h, j in zip(human, judge) if j is not None and h != 0 and j != 0]
    return {
        "judge": judge_id,
        "n": n,
        "exact": exact_agreement(human, judge) if n else math.nan,
        "kappa": cohen_kappa(human, judge, labels=[-1, 0, 1]) if n else math.nan,
        "same_winner_share": (sum(h == j for h, j in decided) / len(decided)) if decided else math.nan,
        "n_decided": len(decided),
    }


def rater_agreement(store: AnnotationStore, dimensions: Iterable[str]) -> list[dict[str, Any]]:
    """Inter-rater reliability per pointwise dimension: Krippendorff's ordinal alpha over the raters x items matrix."""
    ratings = store.ratings(kind="pointwise")
    raters = sorted({r.rater for r in ratings})
    item_ids = sorted({r.item_id for r in ratings})
    by_key = {(r.rater, r.item_id): r for r in ratings}
    rows = []
    for dimension in dimensions:
        matrix: list[list[float | None]] = [
            [finite_number(by_key[(rater, item)].scores.get(dimension)) if (rater, item) in by_key else None for item in item_ids]
            for rater in raters
        ]
        shared = sum(sum(row[i] is not None for row in matrix) >= 2 for i in range(len(item_ids)))
        alpha = krippendorff_alpha(matrix, "ordinal") if len(raters) >= 2 and shared else math.nan
        rows.append({"dimension": dimension, "raters": len(raters), "items_rated_twice": shared, "alpha": alpha})
    return rows
