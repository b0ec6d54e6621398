"""The infilling report's aggregation on fixed records, against values computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from narrative_eval.studies.infilling.report import breakdown, kendall_table, main_table, metric_breakdown, pivot, seed_table

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


def test_seed_table_gives_one_seeds_mean_without_an_sd():
    runs = _runs().drop(columns=["metrics.judge/j/qavg_sd"]).assign(**{"metrics.n_seeds": 1.0})
    table = seed_table(runs).set_index(["model", "setting"])
    assert table.loc[("m1", "L2"), "QAvg[j]"] == "4.0000" and table.loc[("m1", "L2"), "seeds"] == 1


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
    assert breakdown(gens.assign(**{"judge/j/qavg": None}), "position", "j").empty


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
    from narrative_eval.studies.infilling.report import human_agreement_table

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


def test_main_table_carries_intervals_and_folds_them_for_markdown(tmp_path):
    from narrative_eval.studies.infilling.report import _write, fold_intervals

    runs = _runs()
    runs["metrics.at_avg_lo"], runs["metrics.at_avg_hi"] = [0.10, 0.25, 0.15], [0.14, 0.40, 0.30]
    runs["metrics.judge/j/qavg_lo"] = [2.9, 3.7, 3.3]  # no _hi logged: shown without an interval
    table = main_table(runs)
    assert table.loc[0, "at_avg_lo"] == pytest.approx(0.10) and table.loc[2, "at_avg_hi"] == pytest.approx(0.30)
    assert pd.isna(table.loc[0, "rouge1_lo"])  # a run that logged no interval
    folded = fold_intervals(table).set_index(["model", "setting"])
    assert folded.loc[("m1", "L0"), "at_avg"] == "0.120 [0.100, 0.140]"
    assert folded.loc[("m1", "L0"), "rouge1"] == "0.110"
    assert folded.loc[("m1", "L0"), "j:qavg"] == "3.000"
    assert "at_avg_lo" not in folded
    _write(table, tmp_path, "main")
    assert {"at_avg_lo", "at_avg_hi", "j:qavg_lo"} <= set(pd.read_csv(tmp_path / "main.csv").columns)
    assert "0.320 [0.250, 0.400]" in (tmp_path / "main.md").read_text()
    assert "0.320 [0.250, 0.400]" in (tmp_path / "main.tex").read_text()


def test_seed_table_adds_the_interval_to_mean_and_sd():
    from narrative_eval.studies.infilling.report import fold_intervals

    runs = _runs()
    runs["metrics.judge/j/qavg_lo"], runs["metrics.judge/j/qavg_hi"] = [2.5, 3.5, 3.0], [3.5, 4.5, 4.0]
    folded = fold_intervals(seed_table(runs), digits=4).set_index(["model", "setting"])
    assert folded.loc[("m1", "L2"), "QAvg[j]"] == "4.0000 ± 0.2828 [3.5000, 4.5000]"
    assert folded.loc[("m1", "L2"), "AtAvg"] == "0.3200 ± 0.0100"


def test_comparison_tables_write_paired_and_mde_files(tmp_path):
    from narrative_eval.studies.infilling.report import comparison_tables
    from narrative_eval.stats.mde import mde_summary

    rows = []
    for setting, shift in (("L0", 0.0), ("L2", 0.05)):
        for i in range(12):
            row = {"model": "m1", "setting": setting, "instance_id": f"d/p{i}/0/1", "seed": 0,
                   "judge/j/status": "ok" if i else "failed", "judge/j/qavg": 3.0 + (i % 3) if i else None}
            row.update({name: 0.2 + (i % 4) / 100 + shift for name in METRICS})
            rows.append(row)
    titles = comparison_tables(pd.DataFrame(rows), tmp_path, mde_target=0.01)
    assert len(titles) == 4
    groups = pd.read_csv(tmp_path / "groups.csv")
    assert list(groups["group"]) == ["a", "a", "a", "a"]  # one model per setting: nothing to tell apart
    settings = pd.read_csv(tmp_path / "paired_settings.csv").set_index("metric")
    assert list(settings.columns[:10]) == ["model", "a", "b", "n", "delta", "lo", "hi", "p", "p_holm", "holds"]
    assert settings.loc["at_avg", "delta"] == pytest.approx(-0.05) and settings.loc["at_avg", "n"] == 12
    # The judge failed on one instance of each cell: undefined, with its reason and the count it had.
    assert pd.isna(settings.loc["j:qavg", "p"]) and "missing on 2 of 24 rows" in settings.loc["j:qavg", "reason"]
    assert pd.read_csv(tmp_path / "paired_models.csv").empty  # one model: nothing to compare across models
    mde = pd.read_csv(tmp_path / "mde.csv").set_index("metric")
    assert mde.loc["at_avg", "n_instances"] == 12 and mde.loc["at_avg", "mde"] == pytest.approx(0.0)  # constant shift
    line = mde_summary(tmp_path / "mde.csv")
    assert line.startswith("minimum detectable effect (80% power, alpha 0.05, 12 instances): at_avg 0.0000")
    assert "j:qavg undefined (no defined paired comparison among 1)" in line


def test_published_rows_beside_the_sweep(tmp_path):
    from narrative_eval.errors import UserError
    from narrative_eval.stats.reference import beside_reference, load_reference

    published = load_reference("published")
    # Spot checks against the study's text: Table 3, LLaMA-3.2-1B at L2; Table 14, OLMo-2-13B under CoT.
    row = published[(published["table"] == 3) & (published["model"] == "LLaMA-3.2-1B") & (published["setting"] == "L2")]
    assert dict(zip(row["metric"], row["value"])) == {"at_avg": 0.246, "qavg": 3.607}
    olmo = published[(published["table"] == 14) & (published["model"] == "OLMo-2-13B")]
    assert dict(zip(olmo["judge"], olmo["value"])) == {"GPT-4.1-mini": 4.1527, "Gemini 3.5 Flash-Lite": 4.3969}
    assert set(published["table"]) == {3, 5, 10, 11, 12, 13, 14}
    table = beside_reference(main_table(_runs()), ["j"], "demo", "3 cells", published)
    ours = table[table["source"] == "sweep demo"]
    assert len(ours) == 3 and list(ours["qavg"]) == pytest.approx([3.0, 4.0, 3.5]) and set(ours["judge"]) == {"j"}
    theirs = table[table["source"] == "published, Table 10"].set_index("model")
    assert theirs.loc["LLaMA-3.1-8B", "bertscore"] == pytest.approx(0.849) and theirs.loc["LLaMA-3.1-8B", "setting"] == "L0"
    assert table[table["source"] == "published, Table 13"]["note"].str.contains("10% subset").all()
    with pytest.raises(UserError, match="no reference 'nope'"):
        load_reference("nope")


def test_interval_columns_are_not_taken_for_judge_dimensions():
    from narrative_eval.studies.infilling.report import _dimensions

    runs = _runs().assign(**{"metrics.judge/j/fluency_lo": 3.0, "metrics.judge/j/fluency_hi": 4.0})
    assert _dimensions(runs, "j") == ["coherence", "fluency"]
    assert list(kendall_table(runs, "j")["dimension"]) == ["coherence", "fluency", "qavg"]


def test_position_and_domain_tables_carry_passage_bootstrap_intervals():
    # Two passages per group: the resampled mean is either value or their mean, so the interval is the two values.
    gens = pd.DataFrame({
        "setting": ["L2"] * 4, "position": ["opening", "opening", "middle", "middle"],
        "instance_id": ["d/p1/0/1", "d/p2/0/1", "d/p1/2/1", "d/p3/2/1"],
        "judge/j/qavg": [4.0, 4.4, 3.0, 5.0],
        **{m: [0.1, 0.3, 0.2, 0.2] for m in METRICS},
    })
    table = breakdown(gens, "position", "j").set_index("setting")
    assert table.loc["L2", "opening"] == "4.20 [4.00, 4.40] / 50.0%"
    assert table.loc["L2", "middle"] == "4.00 [3.00, 5.00] / 50.0%"
    atavg = metric_breakdown(gens, "position").set_index("setting")
    assert list(atavg.columns) == ["middle", "middle_lo", "middle_hi", "opening", "opening_lo", "opening_hi"]
    assert (atavg.loc["L2", "opening_lo"], atavg.loc["L2", "opening"], atavg.loc["L2", "opening_hi"]) == pytest.approx((0.1, 0.2, 0.3))
    assert atavg.loc["L2", "middle_lo"] == pytest.approx(0.2) == atavg.loc["L2", "middle_hi"]


def test_two_judges_get_a_paired_judges_table(tmp_path):
    from narrative_eval.studies.infilling.report import comparison_tables

    rows = [{"model": "m1", "setting": "L2", "instance_id": f"d/p{i}/0/1", "seed": 0, **{m: 0.2 for m in METRICS},
             "judge/j/status": "ok", "judge/j/qavg": 4.0, "judge/k/status": "ok", "judge/k/qavg": 3.0 + (i % 2)}
            for i in range(12)]
    titles = comparison_tables(pd.DataFrame(rows), tmp_path)
    assert "Paired QAvg differences between judges on the same outputs" in titles
    judges = pd.read_csv(tmp_path / "paired_judges.csv")
    assert list(judges[["model", "setting", "a", "b", "n"]].iloc[0]) == ["m1", "L2", "j", "k", 12]
    assert judges.loc[0, "delta"] == pytest.approx(0.5)  # j gives 4 everywhere, k 3 and 4 in turn
