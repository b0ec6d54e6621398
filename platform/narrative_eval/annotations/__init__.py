"""Human ratings behind the app's Annotate tab: blinded items and ratings in SQLite, their agreement with an
LLM judge and between raters, and ratings as rows for a sweep's report or export.

Modules: store, agreement, ratings (import them from here) and items (what a study's rating items share).
"""

from narrative_eval.annotations.agreement import (
    judge_ids,
    judge_preference,
    pairwise_agreement,
    pointwise_agreement,
    rater_agreement,
)
from narrative_eval.annotations.ratings import RATING_KEYS, ratings_frame_rows, read_ratings_csv, sweep_ratings
from narrative_eval.annotations.store import (
    DEFAULT_PATH,
    ENV_PATH,
    AnnotationItem,
    AnnotationStore,
    Kind,
    Rating,
    canonical_preference,
    default_path,
    item_key,
)

__all__ = [
    "DEFAULT_PATH",
    "ENV_PATH",
    "RATING_KEYS",
    "AnnotationItem",
    "AnnotationStore",
    "Kind",
    "Rating",
    "canonical_preference",
    "default_path",
    "item_key",
    "judge_ids",
    "judge_preference",
    "pairwise_agreement",
    "pointwise_agreement",
    "rater_agreement",
    "ratings_frame_rows",
    "read_ratings_csv",
    "sweep_ratings",
]
