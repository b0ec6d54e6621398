"""Statistics of the incremental-delivery study: story-clustered bootstrap, CI/ICIR, paired effects."""

from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT, ClusterBootstrap, percentile_interval
from narrative_eval.stats.effects import (
    DIMENSIONS,
    QUALITY_DIMENSIONS,
    creative_integrity,
    d_av,
    equal_adherence,
    equal_genre,
    icir,
    icir_table,
    model_d_av,
    pair_frame,
    paired_effects,
    paired_effects_by_model,
    responses_frame,
    same_judge,
)

__all__ = [
    "DEFAULT_N_BOOT",
    "DIMENSIONS",
    "QUALITY_DIMENSIONS",
    "ClusterBootstrap",
    "creative_integrity",
    "d_av",
    "equal_adherence",
    "equal_genre",
    "icir",
    "icir_table",
    "model_d_av",
    "pair_frame",
    "paired_effects",
    "paired_effects_by_model",
    "percentile_interval",
    "responses_frame",
    "same_judge",
]
