"""The infilling report's human-anchored judge means (prediction-powered inference, stats.ppi): fills rated by people
and judges, clustered by passage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.stats.cell_scores import passage_of, row_scores
from narrative_eval.stats.ppi import human_anchored_table, human_rating, judge_score

pd = lazy_module("pandas")


def ppi_table(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """The report's `ppi_<judge>`: per model, setting and judge dimension, from the generations rows
    (a failed judgment has no score) and human ratings (rater, model, prompt_setting, instance_id, seed and the
    dimensions; several raters of one fill averaged). Outputs are clustered by passage, like the cell intervals."""
    keys = ["model", "setting", "instance_id", "seed"]
    scores = row_scores(gens)
    outputs = gens[["model", "setting", "instance_id"]].assign(
        seed=pd.to_numeric(gens["seed"]).astype(int), passage=gens["instance_id"].map(passage_of))
    for dimension in dimensions:
        outputs[judge_score(dimension)] = scores.get(judge_key(judge, dimension), np.full(len(gens), np.nan))
    rated = [d for d in dimensions if d in ratings]
    human = (ratings.rename(columns={"prompt_setting": "setting"}).assign(seed=lambda f: f["seed"].astype(int))
             .groupby(keys)[rated].mean().rename(columns=human_rating).reset_index())
    outputs = outputs.merge(human, on=keys, how="left")
    for dimension in set(dimensions) - set(rated):
        outputs[human_rating(dimension)] = np.nan
    return human_anchored_table(outputs, ["model", "setting"], dimensions, "passage")


__all__ = ["ppi_table"]
