"""The infilling report's judge-against-people tables: human-anchored judge means (prediction-powered inference,
stats.ppi; fills clustered by passage) and the alternative annotator test (stats.alt_test)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.stats.alt_test import EPSILON, MIN_OUTPUTS, alt_test_table
from narrative_eval.stats.cell_scores import passage_of, row_scores
from narrative_eval.stats.ppi import AnchoredOutputs, human_rating, judge_score

pd = lazy_module("pandas")


OUTPUT_KEYS = ["model", "setting", "instance_id", "seed"]
"""What locates one fill among a sweep's generations and its human ratings."""


def _rated(ratings: pd.DataFrame) -> pd.DataFrame:
    """Human ratings keyed like the generations rows (the setting named `setting`, integer seeds)."""
    return ratings.rename(columns={"prompt_setting": "setting"}).assign(seed=lambda f: f["seed"].astype(int))


def _judged(gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """One row per fill: OUTPUT_KEYS, its passage and the judge's score of each dimension under judge_score(d)."""
    scores = row_scores(gens)
    outputs = gens[["model", "setting", "instance_id"]].assign(
        seed=pd.to_numeric(gens["seed"]).astype(int), passage=gens["instance_id"].map(passage_of))
    for dimension in dimensions:
        outputs[judge_score(dimension)] = scores.get(judge_key(judge, dimension), np.full(len(gens), np.nan))
    return outputs


def anchored_fills(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> AnchoredOutputs:
    """The fills of a sweep judged by `judge`, from the generations rows (a failed judgment has no score) and human
    ratings (rater, model, prompt_setting, instance_id, seed and the dimensions; several raters of one fill
    averaged), per model and setting, clustered by passage like the cell intervals."""
    outputs = _judged(gens, judge, dimensions)
    rated = [d for d in dimensions if d in ratings]
    if not ratings.empty and rated:
        human = _rated(ratings).groupby(OUTPUT_KEYS)[rated].mean().rename(columns=human_rating).reset_index()
        outputs = outputs.merge(human, on=OUTPUT_KEYS, how="left")
    for dimension in set(dimensions) - set(rated if not ratings.empty else []):
        outputs[human_rating(dimension)] = np.nan
    return AnchoredOutputs(judge, outputs, ("model", "setting"), tuple(dimensions), "passage")


def ppi_table(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """The report's `ppi_<judge>`: per model, setting and judge dimension (anchored_fills)."""
    return anchored_fills(ratings, gens, judge, dimensions).table()


def alt_test_infilling(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str],
                       epsilon: float = EPSILON, min_outputs: int = MIN_OUTPUTS) -> pd.DataFrame:
    """The report's `alt_test_<judge>`: per judge dimension, the alternative annotator test of the judge against the
    people who rated the same fills (all cells together: the question is the judge's, not a cell's)."""
    def output_id(frame: pd.DataFrame) -> pd.Series:
        return frame[OUTPUT_KEYS].astype(str).agg("\x1f".join, axis=1)

    rated = _rated(ratings)
    judged = _judged(gens, judge, dimensions)
    judged = judged.assign(output=output_id(judged)).rename(columns={judge_score(d): d for d in dimensions})
    return alt_test_table(rated.assign(output=output_id(rated)), judged, "output", dimensions, epsilon, min_outputs)


__all__ = ["alt_test_infilling", "anchored_fills", "ppi_table"]
