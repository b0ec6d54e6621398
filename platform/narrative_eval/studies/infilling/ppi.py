"""The infilling report's judge-against-people tables: human-anchored judge means (prediction-powered inference,
stats.ppi; fills clustered by passage) and the alternative annotator test (stats.alt_test), as every single-turn
study's report makes them (reports.human_ratings), its fills keyed by `instance_id`."""

from __future__ import annotations

from collections.abc import Sequence

from narrative_eval.lazy import lazy_module
from narrative_eval.reports.human_ratings import alt_test, anchored_outputs
from narrative_eval.stats.alt_test import EPSILON, MIN_OUTPUTS
from narrative_eval.stats.cell_scores import passage_of
from narrative_eval.stats.ppi import AnchoredOutputs

pd = lazy_module("pandas")

ID_COLUMN = "instance_id"
"""What names a blank in the generations rows and the ratings."""


def anchored_fills(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> AnchoredOutputs:
    """The fills of a sweep judged by `judge`, from the generations rows (a failed judgment has no score) and human
    ratings (rater, model, prompt_setting, instance_id, seed and the dimensions; several raters of one fill
    averaged), per model and setting, clustered by passage like the cell intervals."""
    return anchored_outputs(ratings, gens, judge, dimensions, ID_COLUMN, passage_of)


def ppi_table(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """The report's `ppi_<judge>`: per model, setting and judge dimension (anchored_fills)."""
    return anchored_fills(ratings, gens, judge, dimensions).table()


def alt_test_infilling(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str],
                       epsilon: float = EPSILON, min_outputs: int = MIN_OUTPUTS) -> pd.DataFrame:
    """The report's `alt_test_<judge>`: per judge dimension, the alternative annotator test of the judge against the
    people who rated the same fills."""
    return alt_test(ratings, gens, judge, dimensions, ID_COLUMN, epsilon, min_outputs)


__all__ = ["alt_test_infilling", "anchored_fills", "ppi_table"]
