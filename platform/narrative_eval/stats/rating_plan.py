"""How many more human ratings a cell needs for an interval of a target width: power analysis for PPI.

From a pilot (the judge's scores of a cell's N outputs, people's ratings of n of them), each route to the mean
human rating has a variance whose parts scale differently with more ratings (stats.ppi):

- PPI++ (the tuned estimator): var = F + R, with F the judge's spread over the N outputs and its covariance with
  the rated differences (fixed by N, not by the ratings) and R the rated differences' term, which falls as 1/n.
  Rating n' outputs gives F + R n / n', so a full width W (= 2 z se) needs n' = R n / ((W / 2z)^2 - F); when
  (W / 2z)^2 <= F no number of ratings of these outputs reaches W (the cell needs more outputs judged);
- human only: var = H n / n', so n' = H n / (W / 2z)^2;
- judge only: no rating at all, but it estimates the judge's mean, off people's by the judge's bias (the pilot's
  PPI minus judge estimate is reported beside it); its width with N outputs, and the outputs it would need.

The plan is the pilot's variances carried forward (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic 2023 and
PPI++, Angelopoulos, Duchi and Zrnic 2023, arXiv 2311.01453, plan sample sizes the same way): new ratings drawn
like the pilot's (uniformly among the cell's outputs) give intervals of about the planned width; bench/ppi_plan.py
checks the prediction against simulated ratings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from narrative_eval.lazy import lazy_module
from narrative_eval.stats.ppi import DEFAULT_LEVEL, human_anchored_mean, human_rating, judge_score

pd = lazy_module("pandas")


@dataclass(frozen=True)
class RatingPlan:
    """One cell and dimension: the ratings each route needs for an interval of `target_width`."""

    n_all: int
    """Outputs with a judge score."""
    n_rated: int
    """Outputs people rated so far (the pilot)."""
    width: float
    """The PPI++ interval's full width now."""
    ppi_needed: float
    """Rated outputs PPI++ needs in all (NaN: unreachable with these outputs, or no pilot to plan from)."""
    human_needed: float
    """Rated outputs the human-only mean needs in all."""
    judge_width: float
    """The judge-only interval's width with the N outputs (no rating; it estimates the judge's mean)."""
    judge_outputs_needed: float
    """Outputs the judge-only route needs judged for the width (its bias does not shrink with them)."""
    judge_bias: float
    """The pilot's estimate of the judge's bias: the judge's mean minus the PPI++ estimate of people's."""
    reason: str
    """Why a route has no number, or why it needs more outputs than the cell has ("" when neither)."""


def rating_plan(judge: Sequence[float] | np.ndarray, human: Sequence[float] | np.ndarray, target_width: float,
                clusters: Sequence | np.ndarray | None = None, level: float = DEFAULT_LEVEL) -> RatingPlan:
    """The plan for one cell and dimension, from its outputs' judge scores and mean human ratings (NaN: not rated)."""
    if not target_width > 0:
        raise ValueError(f"the target width must be positive, not {target_width}")
    pilot = human_anchored_mean(judge, human, clusters, level)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    allowed = (target_width / (2 * z)) ** 2
    n, big_n = pilot.n_rated, pilot.n_all
    fixed, shrinking = pilot.tuned_variance
    human_variance = ((pilot.human.hi - pilot.human.lo) / (2 * z)) ** 2
    judge_variance = ((pilot.judge.hi - pilot.judge.lo) / (2 * z)) ** 2
    reasons = [pilot.reason] if pilot.reason else []
    ppi_needed = human_needed = math.nan
    if math.isfinite(shrinking):
        if allowed > fixed:
            ppi_needed = float(math.ceil(shrinking * n / (allowed - fixed)))
        else:
            reasons.append("PPI++ cannot reach the width with these outputs: the judge's spread over them alone is "
                           "wider (judge more outputs)")
    if math.isfinite(human_variance) and n:
        human_needed = float(math.ceil(human_variance * n / allowed))
    for route, needed in (("PPI++", ppi_needed), ("human-only", human_needed)):
        if needed > big_n:
            reasons.append(f"{route} needs more rated outputs than the cell's {big_n}")
    judge_width = pilot.judge.hi - pilot.judge.lo
    return RatingPlan(
        big_n, n, pilot.ppi_tuned.hi - pilot.ppi_tuned.lo, ppi_needed, human_needed, judge_width,
        float(math.ceil(judge_variance * big_n / allowed)) if math.isfinite(judge_variance) else math.nan,
        pilot.judge.mean - pilot.ppi_tuned.mean, "; ".join(reasons))


PLAN_COLUMNS: tuple[str, ...] = ("n_all", "n_rated", "target_width", "width", "ppi_needed", "ppi_more",
                                 "human_needed", "human_more", "judge_width", "judge_outputs_needed", "judge_bias",
                                 "reason")
"""The columns of a rating-plan row after its keys (docs/formats.md)."""


def rating_plan_table(outputs: pd.DataFrame, cell_keys: Sequence[str], dimensions: Sequence[str], cluster: str,
                      target_width: float, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """One row per cell and dimension (cell keys, dimension, PLAN_COLUMNS), from the frame stats.ppi's
    human_anchored_table reads; `<route>_more` = what it needs beyond the ratings so far (0 when it has enough)."""
    rows = []
    for keys, cell in outputs.groupby(list(cell_keys), sort=True):
        for dimension in dimensions:
            plan = rating_plan(cell[judge_score(dimension)], cell[human_rating(dimension)], target_width,
                               cell[cluster], level)
            rows.append({**dict(zip(cell_keys, keys if isinstance(keys, tuple) else (keys,))), "dimension": dimension,
                         "n_all": plan.n_all, "n_rated": plan.n_rated, "target_width": target_width,
                         "width": plan.width, "ppi_needed": plan.ppi_needed,
                         "ppi_more": max(plan.ppi_needed - plan.n_rated, 0.0), "human_needed": plan.human_needed,
                         "human_more": max(plan.human_needed - plan.n_rated, 0.0), "judge_width": plan.judge_width,
                         "judge_outputs_needed": plan.judge_outputs_needed, "judge_bias": plan.judge_bias,
                         "reason": plan.reason})
    return pd.DataFrame(rows, columns=[*cell_keys, "dimension", *PLAN_COLUMNS])


__all__ = ["PLAN_COLUMNS", "RatingPlan", "rating_plan", "rating_plan_table"]
