"""The infilling report's aggregation on fixed records, against values computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from narrative_eval.reports.infilling import breakdown, kendall_table, main_table, metric_breakdown, pivot, seed_table

METRICS = ("bertscore", "rouge1", "meteor", "chrf", "semf1")


def _runs() -> pd.DataFrame:
    """Three cells as mlflow.search_runs would return them, judge 'j' with two dimensions."""
    rows = []
    for model, setting, base, qavg, seeds in [
        ("m1", "L0", 0.10, 3.0, (3.0, 3.0)),
        ("m1", "L2", 0.30, 4.0, (3.8, 4.2)),
        ("m2", "L2", 0.20, 3.5, (3.4, 3.6)),
    ]:
        row = {"run_id": f"{model}-{setting}", "params.model_id": model, "params.prompt_setting": setting,
               "metrics.n_seeds": 2.0}
        for offset, name in enumerate(METRICS):
            row[f"metrics.{name}"] = base + offset / 100
        row["metrics.at_avg"] = base + 0.02
        row["metrics.at_avg_sd"] = 0.01
        row["metrics.judge/j/fluency"] = qavg + 0.5
        row["metrics.judge/j/coherence"] = qavg - 0.5
        row["metrics.judge/j/qavg"] = sum(seeds) / 2
        row["metrics.judge/j/qavg_sd"] = pd.Series(seeds).std()
        row["metrics.judge/j/high_pct"] = 50.0
        row["metrics.judge/j/failure_rate"] = 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_main_table_has_metrics_and_judge_dimensions():
    table = main_table(_runs())
    assert list(table["model"]) == ["m1", "m1", "m2"]
    assert {"at_avg", "j:fluency", "j:coherence", "j:qavg", "j:high_pct"} <= set(table.columns)
    assert table.loc[1, "rouge1"] == pytest.approx(0.31)


def test_pivot_model_by_setting():
    table = pivot(_runs(), "at_avg").set_index("model")
    assert table.loc["m1", "L0"] == pytest.approx(0.12)
    assert table.loc["m2", "L2"] == pytest.approx(0.22)
    assert pd.isna(table.loc["m2", "L0"])


def test_seed_table_mean_and_sd():
    table = seed_table(_runs()).set_index(["model", "setting"])
    # seeds 3.8 and 4.2: mean 4.0, sample SD 0.2828
    assert table.loc[("m1", "L2"), "QAvg[j]"] == "4.0000 ± 0.2828"
    assert table.loc[("m1", "L0"), "QAvg[j]"] == "3.0000 ± 0.0000"


def test_high_pct_uses_strict_threshold_and_position_breakdown():
    gens = pd.DataFrame({
        "setting": ["L2"] * 5,
        "position": ["opening", "opening", "middle", "middle", "closing"],
        "judge/j/qavg": [4.0, 4.2, 5.0, 3.0, None],  # 4.0 is not high-quality: the rule is > 4
    })
    table = breakdown(gens, "position", "j").set_index("setting")
    assert table.loc["L2", "opening"] == "4.10 / 50.0%"
    assert table.loc["L2", "middle"] == "4.00 / 50.0%"
    assert "closing" not in table.columns  # a failed judgment is not scored


def test_metric_breakdown_by_domain():
    gens = pd.DataFrame({"setting": ["L0", "L0"], "domain": ["news", "story"],
                         **{m: [0.5, 0.1] for m in METRICS}})
    table = metric_breakdown(gens, "domain").set_index("setting")
    assert table.loc["L0", "news"] == pytest.approx(0.5) and table.loc["L0", "story"] == pytest.approx(0.1)


def test_kendall_tau_system_level():
    table = kendall_table(_runs(), "j").set_index("dimension")
    # Systems ordered by AtAvg: m1/L0 < m2/L2 < m1/L2; by fluency: 3.5 < 4.0 < 4.5 -> perfect agreement.
    assert table.loc["fluency", "rouge1"] == pytest.approx(1.0)
    # QAvg per system: 3.0, 4.0, 3.5 against metrics 0.1x, 0.3x, 0.2x: also concordant.
    assert table.loc["qavg", "chrf"] == pytest.approx(1.0)


def test_human_agreement_table_against_hand_values():
    """Raters a and b share outputs 1-4; a alone rated output 5. kappa uses the shared outputs only
    (quadratic weights (i-j)^2/16: observed 1/32, expected 3/16, kappa = 1 - 1/6); each rho uses
    every output its rater scored (a: sum d^2 = 2 over 5 -> 0.9; b: ties, rho = 3 / sqrt(22.5))."""
    from narrative_eval.reports.infilling import human_agreement_table

    a, b, judge = [1, 2, 3, 4, 5], [2, 2, 3, 5, None], [1, 3, 2, 4, 5]
    ratings = pd.DataFrame(
        [{"rater": "a", "model": "m", "prompt_setting": "L2", "instance_id": f"i{k}", "seed": 0, "fluency": v}
         for k, v in enumerate(a)]
        + [{"rater": "b", "model": "m", "prompt_setting": "L2", "instance_id": f"i{k}", "seed": 0, "fluency": v}
           for k, v in enumerate(b) if v is not None]
    )
    gens = pd.DataFrame([{"model": "m", "setting": "L2", "instance_id": f"i{k}", "seed": 0, "judge/j/fluency": v}
                         for k, v in enumerate(judge)])
    table = human_agreement_table(ratings, gens, "j", ["fluency"])
    row = table.iloc[0]
    assert row["kappa[a|b]"] == pytest.approx(1 - 1 / 6)
    assert row["rho[j|a]"] == pytest.approx(0.9)
    assert row["rho[j|b]"] == pytest.approx(3 / 22.5 ** 0.5)
    assert row["n_outputs"] == 5
    assert list(table["dimension"]) == ["fluency", "Average"]
    assert table.iloc[1]["rho[j|a]"] == pytest.approx(0.9)
