"""The story-clustered bootstrap resamples tasks (keeping all their models), reproducibly (bench/bootstrap.py times it)."""

from __future__ import annotations

import numpy as np
from narrative_eval.stats.bootstrap import ClusterBootstrap, percentile_interval
from narrative_eval.studies.incremental.effects import paired_effects

from bench import bootstrap as bootstrap_bench


def test_rows_of_one_task_always_share_their_weight():
    stories = ["s1", "s1", "s2", "s2", "s3", "s3"]
    boot = ClusterBootstrap(stories, n_boot=500, seed=1)
    weights = boot.row_weights()
    assert weights.shape == (500, 6)
    assert np.array_equal(weights[:, 0], weights[:, 1]) and np.array_equal(weights[:, 4], weights[:, 5])
    # Each resample draws as many tasks as there are (3), so rows sum to twice that.
    assert set(weights.sum(axis=1)) == {6}
    assert set(boot.weights.sum(axis=1)) == {3}


def test_clustered_interval_reflects_tasks_not_rows():
    """Two models per task with identical (perfectly correlated) deltas: the information is one value
    per task, so the interval must be as wide as for T values, sqrt(2) wider than row resampling gives."""
    rng = np.random.default_rng(7)
    n_tasks = 200
    task_delta = rng.normal(0.5, 1.0, n_tasks)
    stories = np.repeat([f"t{i}" for i in range(n_tasks)], 2)
    deltas = np.repeat(task_delta, 2)

    clustered = ClusterBootstrap(stories, n_boot=10_000, seed=0)
    rows = ClusterBootstrap(np.arange(len(deltas)), n_boot=10_000, seed=0)
    lo_c, hi_c = percentile_interval(clustered.means(deltas))
    lo_r, hi_r = percentile_interval(rows.means(deltas))
    width_clustered, width_rows = hi_c - lo_c, hi_r - lo_r

    expected = 2 * 1.96 * task_delta.std(ddof=1) / np.sqrt(n_tasks)
    assert abs(width_clustered - expected) / expected < 0.08
    assert 1.3 < width_clustered / width_rows < 1.55
    assert lo_c < deltas.mean() < hi_c


def test_ratio_of_means_matches_a_direct_computation():
    stories = ["a", "a", "b", "c", "c", "c"]
    num = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    den = np.array([2.0, 2.0, 2.0, 2.0, 2.0, np.nan])
    boot = ClusterBootstrap(stories, n_boot=50, seed=3)
    ratios = boot.ratio_of_means(num, den)
    stories_array = np.array(stories)
    for b in range(50):
        # The resample, spelled out: each drawn task contributes all of its rows, once per draw.
        take: list[int] = []
        for c, label in enumerate(boot.cluster_labels):
            take += list(np.flatnonzero(stories_array == label)) * int(boot.weights[b, c])
        take_array = np.array(take, dtype=int)
        valid = take_array[~np.isnan(den[take_array])]
        assert np.isclose(ratios[b], num[valid].sum() / den[valid].sum())


def test_strata_keep_their_task_counts():
    stories = [f"g{g}_{i}" for g in range(3) for i in range(g + 2)]
    genres = [s.split("_")[0] for s in stories]
    boot = ClusterBootstrap(stories, n_boot=300, seed=2, strata=genres)
    for genre, size in (("g0", 2), ("g1", 3), ("g2", 4)):
        members = [i for i, label in enumerate(boot.cluster_labels) if label.startswith(genre)]
        assert set(boot.weights[:, members].sum(axis=1)) == {size}


def test_same_seed_same_resamples():
    a = ClusterBootstrap(["x", "y", "z"], n_boot=100, seed=11).weights
    b = ClusterBootstrap(["x", "y", "z"], n_boot=100, seed=11).weights
    c = ClusterBootstrap(["x", "y", "z"], n_boot=100, seed=12).weights
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_ten_thousand_resamples_of_960_pairs_give_intervals_around_each_effect():
    """The full grid's size (160 tasks x 6 models); bench/bootstrap.py times the same table (a test asserts no time)."""
    table = paired_effects(bootstrap_bench.pairs(), n_boot=10_000, seed=0)
    assert (table["n"] == 960).all()
    assert ((table["lo"] <= table["delta"]) & (table["delta"] <= table["hi"])).all()
