"""A single-turn sweep's judges against the people who rated its outputs: their agreement (quadratic-weighted kappa
between raters, Spearman rho between the judge and each rater), human-anchored judge means (prediction-powered
inference, stats.ppi) and the alternative annotator test (stats.alt_test), from the sweep's generations rows and
people's ratings (`annotations.sweep_ratings` or a ratings CSV: rater, model, prompt_setting, instance_id, seed and
one column per dimension).

An output is located by its cell (model, setting), its item id (the study's id column) and its seed; the rows name
the item id after the study (`id_column`), the ratings `instance_id`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from narrative_eval import annotations
from narrative_eval.judges.agreement import cohen_kappa, spearman
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key
from narrative_eval.stats.alt_test import EPSILON, MIN_OUTPUTS, alt_test_table
from narrative_eval.stats.cell_scores import row_scores
from narrative_eval.stats.ppi import AnchoredOutputs, human_rating, judge_score

pd = lazy_module("pandas")

CELL = ["model", "setting"]
"""What a rated output's cell is."""
CLUSTER = "cluster"
"""The column of what an output is drawn with when its intervals are bootstrapped."""
SCALE = [1, 2, 3, 4, 5]


def output_keys(id_column: str) -> list[str]:
    """What locates one output among a sweep's generations rows and its ratings."""
    return [*CELL, id_column, "seed"]


def keyed_ratings(ratings: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """Ratings keyed like the generations rows (the setting named `setting`, the item id under `id_column`, integer
    seeds)."""
    return ratings.rename(columns={"prompt_setting": "setting", "instance_id": id_column}).assign(
        seed=lambda f: f["seed"].astype(int))


def judged_outputs(gens: pd.DataFrame, judge: str, dimensions: Sequence[str], id_column: str,
                   cluster: Callable[[Any], Any] | None = None) -> pd.DataFrame:
    """One row per output: its keys, its cluster (`cluster` of its item id; the id itself by default) and the judge's
    score of each dimension under stats.ppi.judge_score (a failed judgment has none)."""
    scores = row_scores(gens)
    ids = gens[id_column]
    outputs = gens[[*CELL, id_column]].assign(seed=pd.to_numeric(gens["seed"]).astype(int),
                                              **{CLUSTER: ids.map(cluster) if cluster is not None else ids})
    for dimension in dimensions:
        outputs[judge_score(dimension)] = scores.get(judge_key(judge, dimension), np.full(len(gens), np.nan))
    return outputs


def anchored_outputs(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str],
                     id_column: str, cluster: Callable[[Any], Any] | None = None) -> AnchoredOutputs:
    """The outputs judged by `judge` with people's mean rating of each (several raters of one output averaged), per
    model and setting, clustered as `judged_outputs` says."""
    keys = output_keys(id_column)
    outputs = judged_outputs(gens, judge, dimensions, id_column, cluster)
    rated = [d for d in dimensions if d in ratings] if not ratings.empty else []
    if rated:
        human = keyed_ratings(ratings, id_column).groupby(keys)[rated].mean().rename(columns=human_rating)
        outputs = outputs.merge(human.reset_index(), on=keys, how="left")
    for dimension in set(dimensions) - set(rated):
        outputs[human_rating(dimension)] = np.nan
    return AnchoredOutputs(judge, outputs, tuple(CELL), tuple(dimensions), CLUSTER)


def alt_test(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str], id_column: str,
             epsilon: float = EPSILON, min_outputs: int = MIN_OUTPUTS) -> pd.DataFrame:
    """`alt_test_<judge>`: per dimension, the alternative annotator test of the judge against the people who rated the
    same outputs (all cells together: the question is the judge's, not a cell's)."""
    keys = output_keys(id_column)

    def output_id(frame: pd.DataFrame) -> pd.Series:
        return frame[keys].astype(str).agg("\x1f".join, axis=1)

    rated = keyed_ratings(ratings, id_column)
    judged = judged_outputs(gens, judge, dimensions, id_column)
    judged = judged.assign(output=output_id(judged)).rename(columns={judge_score(d): d for d in dimensions})
    return alt_test_table(rated.assign(output=output_id(rated)), judged, "output", dimensions, epsilon, min_outputs)


def human_agreement_table(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str, dimensions: Sequence[str],
                          id_column: str = "instance_id") -> pd.DataFrame:
    """Per dimension: quadratic-weighted Cohen's kappa between every pair of raters on the outputs both rated, and
    Spearman rho between the judge and each rater; a last row averages each column (the infilling study's Table 2)."""
    keys = output_keys(id_column)
    judged = gens.assign(seed=pd.to_numeric(gens["seed"]).astype(int))
    ratings = keyed_ratings(ratings, id_column)
    raters = sorted(ratings["rater"].unique())
    rows = []
    for dimension in dimensions:
        row: dict[str, Any] = {"dimension": dimension}
        if dimension not in ratings:
            rows.append(row)
            continue
        wide = ratings.pivot_table(index=keys, columns="rater", values=dimension, aggfunc="mean")
        for i, a in enumerate(raters):
            for b in raters[i + 1:]:
                if a in wide and b in wide:
                    both = wide[[a, b]].dropna()
                    row[f"kappa[{a}|{b}]"] = (cohen_kappa(both[a].round().astype(int).tolist(),
                                                          both[b].round().astype(int).tolist(),
                                                          weights="quadratic", labels=SCALE)
                                              if len(both) >= 2 else np.nan)
        column = judge_key(judge, dimension)
        merged = (wide.reset_index().merge(judged[keys + [column]], on=keys, how="inner") if column in judged
                  else pd.DataFrame())
        for rater in raters:
            pair = (merged[[rater, column]].apply(pd.to_numeric, errors="coerce").dropna() if rater in merged
                    else pd.DataFrame())
            row[f"rho[{judge}|{rater}]"] = (spearman(pair[rater].tolist(), pair[column].tolist(), n_boot=200).estimate
                                            if len(pair) >= 3 else np.nan)
        row["n_outputs"] = len(wide)
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        average = {"dimension": "Average", **table.drop(columns=["dimension", "n_outputs"], errors="ignore")
                   .mean(numeric_only=True).to_dict()}
        table = pd.concat([table, pd.DataFrame([average])], ignore_index=True)
    return table


def human_rho(table: pd.DataFrame, judge: str) -> float:
    """The judge's agreement with people for its report card: its Spearman rho with each rater, averaged over the
    raters and the dimensions (the agreement table's last row); NaN when no rater rated three of its outputs."""
    if table.empty:
        return math.nan
    average = table.iloc[-1]
    values = [float(average[c]) for c in table.columns if str(c).startswith(f"rho[{judge}|")]
    values = [v for v in values if math.isfinite(v)]
    return float(np.mean(values)) if values else math.nan


def stored_ratings(sweep: str, study: str, path: str | Path | None = None) -> pd.DataFrame:
    """People's pointwise ratings of one sweep's outputs from the annotation store at `path` (default: the app's),
    of one study's items (`study`: its MLflow experiment); empty when there is no store."""
    path = Path(path) if path is not None else annotations.default_path()
    rows = annotations.sweep_ratings(annotations.AnnotationStore(path), sweep, study) if path.exists() else []
    return pd.DataFrame(rows)


__all__ = ["CELL", "CLUSTER", "alt_test", "anchored_outputs", "human_agreement_table", "human_rho", "judged_outputs",
           "keyed_ratings", "output_keys", "stored_ratings"]
