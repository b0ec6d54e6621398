"""Paired comparisons and the minimum detectable effect on small worked examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from narrative_eval.metrics import at_avg_names
from narrative_eval.stats.mde import mde, mde_table, needed_instances, z_sum
from narrative_eval.stats.paired import clustered_se, compare_cells, holm, paired_delta, paired_judges, paired_settings


def cell(model: str, setting: str, values, seeds=(0,), **judge) -> pd.DataFrame:
    """A cell's generations rows: instance i (its own passage) gets values[i] on every AtAvg metric, per seed."""
    rows = []
    for seed in seeds:
        for i, value in enumerate(values):
            row = {"model": model, "setting": setting, "instance_id": f"d/p{i}/0/1", "seed": seed}
            row.update({name: value for name in at_avg_names()} if value is not None else {})
            row.update({k.replace("_", "/"): v[i] for k, v in judge.items()})
            rows.append(row)
    return pd.DataFrame(rows)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01 = 0.03, 2*0.03 = 0.06, max(0.06, 1*0.04) = 0.06; NaN is not in the family.
    adjusted = holm(pd.Series([0.01, 0.04, np.nan, 0.03]))
    assert list(adjusted[[0, 1, 3]]) == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[2])


def test_constant_difference_has_a_point_interval_and_the_smallest_p():
    result = paired_delta(np.full(12, 0.5), np.full(12, 0.3), np.arange(12), n_boot=999)
    assert result["delta"] == pytest.approx(0.2)
    assert (result["lo"], result["hi"]) == pytest.approx((0.2, 0.2))
    assert result["p"] == pytest.approx(2 / 1000)  # no resample at or below 0: 2 * (0 + 1) / (999 + 1)


def test_symmetric_differences_are_not_significant():
    d = np.array([0.1, -0.1] * 6)
    result = paired_delta(d, np.zeros(12), np.arange(12))
    assert result["delta"] == pytest.approx(0.0) and result["p"] > 0.5 and result["lo"] < 0 < result["hi"]


def test_clustered_se_by_hand():
    # No clustering: SE = sample SD / sqrt(n). d = 1, 2, 3, 4: SD = 1.2910, SE = 0.6455.
    assert clustered_se(np.array([1.0, 2, 3, 4]), np.array(["a", "b", "c", "d"])) == pytest.approx(1.2910 / 2, abs=1e-4)
    # Two passages {1, 2} and {3, 4}: residual sums -2 and 2 -> sqrt(2/1 * 8) / 4 = 1.0.
    assert clustered_se(np.array([1.0, 2, 3, 4]), np.array(["a", "a", "b", "b"])) == pytest.approx(1.0)


def test_too_few_shared_instances_is_undefined_with_its_count():
    result = compare_cells(cell("m", "L0", [0.3] * 9), cell("m", "L2", [0.2] * 12), "at_avg")
    assert result["n"] == 9 and math.isnan(result["delta"]) and "9 shared instances" in result["reason"]


def test_a_missing_metric_or_failed_judgment_makes_the_comparison_undefined():
    values = [0.3] * 12
    gaps = [0.2] * 11 + [None]  # the last instance's answer was not extracted: no metric on its row
    result = compare_cells(cell("m", "L0", values), cell("m", "L2", gaps), "at_avg")
    assert math.isnan(result["delta"]) and result["n"] == 12 and "missing on 1 of 24 rows" in result["reason"]
    judged = {"judge_j_status": ["ok"] * 11 + ["failed"], "judge_j_qavg": [4.0] * 11 + [None]}
    result = compare_cells(cell("m", "L0", values, **judged), cell("m", "L2", values, **judged), "judge/j/qavg")
    assert math.isnan(result["p"]) and "missing on 2 of 24 rows" in result["reason"]


def test_settings_table_pairs_each_model_and_seeds_are_averaged_first():
    # L2 is 0.1 above L0 on every instance; with two seeds the instance value is the seed mean.
    gens = pd.concat([cell("m", "L0", [0.2 + i / 100 for i in range(12)], seeds=(0, 1)),
                      cell("m", "L2", [0.3 + i / 100 for i in range(12)], seeds=(0, 1)),
                      cell("m", "L4", [0.2 + i / 100 for i in range(12)], seeds=(0, 1))])
    table = paired_settings(gens).set_index(["a", "b"])
    assert list(table.columns[:4]) == ["model", "metric", "n", "delta"]
    assert table.loc[("L0", "L2"), "delta"] == pytest.approx(-0.1) and table.loc[("L0", "L2"), "n"] == 12
    assert bool(table.loc[("L0", "L2"), "holds"]) and bool(table.loc[("L2", "L4"), "holds"])
    assert not table.loc[("L0", "L4"), "holds"] and table.loc[("L0", "L4"), "p"] == 1.0
    # Holm over the family of three: the smallest p is tripled.
    assert table.loc[("L0", "L2"), "p_holm"] == pytest.approx(min(1.0, 3 * table.loc[("L0", "L2"), "p"]))


def test_mde_formula_by_hand():
    assert z_sum() == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert mde(0.1, 49) == pytest.approx(2.801585 * 0.1 / 7, abs=1e-6)
    # n = (2.8016 * 0.1 / 0.04)^2 = 49.06 -> 50
    assert needed_instances(0.1, 0.04) == 50
    assert math.isnan(mde(float("nan"), 12)) and math.isnan(needed_instances(0.1, 0.0))


def test_mde_table_pools_the_comparisons_variance():
    comparisons = pd.DataFrame({
        "metric": ["at_avg", "at_avg", "at_avg", "j:qavg"], "n": [16, 16, 16, 16],
        "se": [0.01, 0.02, np.nan, np.nan],  # per-instance variance 16 * SE^2: 0.0016 and 0.0064, mean 0.004
    })
    table = mde_table(comparisons, n_instances=16, target=0.02).set_index("metric")
    assert table.loc["at_avg", "sd"] == pytest.approx(math.sqrt(0.004))
    assert table.loc["at_avg", "mde"] == pytest.approx(z_sum() * math.sqrt(0.004) / 4)
    assert table.loc["at_avg", "n_comparisons"] == 2 and table.loc["at_avg", "n_needed"] == 79  # 78.5 rounded up
    assert math.isnan(table.loc["j:qavg", "mde"]) and "no defined" in table.loc["j:qavg", "reason"]


def test_judges_are_compared_on_the_same_outputs():
    values = [0.3] * 12
    judged = {"judge_a_status": ["ok"] * 12, "judge_a_qavg": [4.0 + (i % 2) / 2 for i in range(12)],
              "judge_b_status": ["ok"] * 12, "judge_b_qavg": [3.5 + (i % 2) / 2 for i in range(12)],
              "judge_c_status": ["ok"] * 11 + ["failed"], "judge_c_qavg": [4.0] * 11 + [None]}
    table = paired_judges(cell("m", "L2", values, seeds=(0, 1), **judged)).set_index(["a", "b"])
    # a scores every output 0.5 above b: a constant difference, the smallest p (2 / 1001 with 1000 resamples).
    assert table.loc[("a", "b"), "delta"] == pytest.approx(0.5) and table.loc[("a", "b"), "n"] == 12
    assert table.loc[("a", "b"), "p"] == pytest.approx(2 / 1001) and table.loc[("a", "b"), "holds"]
    # c failed on one output (both seeds): its pairs are undefined and stay out of the Holm family, which is
    # then a family of one, so a-b keeps its p.
    assert "judge/a/qavg or judge/c/qavg missing on 2 of 48 rows" in table.loc[("a", "c"), "reason"]
    assert pd.isna(table.loc[("a", "c"), "holds"]) and pd.isna(table.loc[("b", "c"), "p_holm"])
    assert table.loc[("a", "b"), "p_holm"] == pytest.approx(table.loc[("a", "b"), "p"])


def test_letter_groups_by_hand():
    from narrative_eval.stats.paired import letter_groups

    # A > B > C with only A-C different: {A, B, C} splits into {B, C} and {A, B} -> A "a", B "ab", C "b".
    assert letter_groups(["A", "B", "C"], {frozenset("AC")}) == {"A": "a", "B": "ab", "C": "b"}
    assert letter_groups(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}
    everything = {frozenset("AB"), frozenset("AC"), frozenset("BC")}
    assert letter_groups(["A", "B", "C"], everything) == {"A": "a", "B": "b", "C": "c"}
    # Four items, A-C, A-D and B-D different: {A, B} a, {B, C} b, {C, D} c.
    found = letter_groups(list("ABCD"), {frozenset("AC"), frozenset("AD"), frozenset("BD")})
    assert found == {"A": "a", "B": "ab", "C": "bc", "D": "c"}


def test_model_groups_follow_the_paired_models_table():
    from narrative_eval.stats.paired import model_groups, paired_models

    gens = pd.concat([cell("m1", "L2", [0.5 + i / 100 for i in range(12)]),
                      cell("m2", "L2", [0.5 + i / 100 for i in range(12)]),
                      cell("m3", "L2", [0.2 + i / 100 for i in range(12)])])
    groups = model_groups(gens, paired_models(gens)).set_index("model")
    assert list(groups.index) == ["m1", "m2", "m3"]  # best first, ties by name
    assert list(groups["group"]) == ["a", "a", "b"] and set(groups["undefined"]) == {0}
