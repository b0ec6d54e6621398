"""The rate-next order of the Annotate tab (annotations.rate_next) and the design each rating keeps in the store."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from narrative_eval.annotations import AnnotationItem, AnnotationStore, Rating
from narrative_eval.annotations.rate_next import cell_intervals, design_of, judge_uncertainty, rate_next_plan, sweep_seed


def test_uncertainty_from_two_judges_or_from_one_judges_dimensions():
    assert judge_uncertainty({"a": {"x": 4, "y": 2}, "b": {"x": 1, "y": 1}}) == pytest.approx(np.std([3, 1], ddof=1))
    assert judge_uncertainty({"a": {"x": 5, "y": 1, "z": None}}) == pytest.approx(np.std([5, 1], ddof=1))
    assert judge_uncertainty({"a": {"x": 3}}) == 0.0
    assert math.isnan(judge_uncertainty({})) and math.isnan(judge_uncertainty({"a": {"x": None}}))


def test_every_cell_gets_its_share_and_each_output_its_probability():
    rng = np.random.default_rng(0)
    cells = [("m1", "L1")] * 40 + [("m2", "L1")] * 20
    uncertainty = rng.uniform(0, 2, 60)
    plan = rate_next_plan(cells, uncertainty, seed=sweep_seed("s"))
    assert sorted(plan["index"]) == list(range(60))
    assert plan.equals(rate_next_plan(cells, uncertainty, seed=sweep_seed("s")))  # the same order for every rater
    # Budgets: 25% of each cell (10 and 5); the first 15 ratings give each cell its budget.
    assert plan["cell"][:15].value_counts().to_dict() == {("m1", "L1"): 10, ("m2", "L1"): 5}
    first = plan[plan["cell"] == ("m1", "L1")]
    # The most uncertain third of m1's outputs gets the most ratings, with a known probability each.
    by_stratum = first.groupby("stratum")["probability"].first()
    assert by_stratum.is_monotonic_increasing and by_stratum.iloc[-1] > by_stratum.iloc[0]
    assert np.allclose(first["weight"], 1 / first["probability"])
    design = design_of(plan.iloc[0])
    assert design["order"] == "rate-next" and design["weight"] == pytest.approx(1 / design["probability"])


def test_the_interval_narrows_as_ratings_follow_the_order():
    rng = np.random.default_rng(4)
    n = 120
    quality = rng.normal(3, 0.8, n)
    spread = np.where(rng.random(n) < 0.6, 0.1, 1.2)
    judge = quality + 0.4 + rng.normal(0, 1, n) * spread
    human = quality + rng.normal(0, 0.3, n)
    plan = rate_next_plan(["c"] * n, spread, seed=1)
    widths = []
    for rated in (24, 60, 110):
        seen = np.full(n, np.nan)
        taken = plan["index"].to_numpy()[:rated]
        seen[taken] = human[taken]
        ((_, result),) = cell_intervals(["c"] * n, spread, judge, seen)
        assert result.n_rated == rated
        widths.append(result.estimate.hi - result.estimate.lo)
    assert widths[0] > widths[1] > widths[2]


def test_a_rating_keeps_its_design_and_an_older_store_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # a store made before ratings kept their design
        db.executescript("""create table ratings (item_id text not null, rater text not null, kind text not null,
            shown_order text not null, scores text not null, preference integer, label text not null default '',
            seconds real, created_at real not null, primary key (item_id, rater));""")
    store = AnnotationStore(path)
    store.add_item(AnnotationItem("i1", "pointwise", "infilling", "s", "inst", 0, "ctx ___", ("fill",)))
    design = {"order": "rate-next", "cell": ["m", "L1"], "stratum": 2, "probability": 0.5, "weight": 2.0}
    store.save_rating(Rating("i1", "ann", "pointwise", (0,), {"fluency": 4}, design=design))
    store.save_rating(Rating("i1", "bob", "pointwise", (0,), {"fluency": 3}))
    saved = {r.rater: r for r in store.ratings()}
    assert saved["ann"].design == design and saved["bob"].design == {}
