"""People's ratings of a single-turn study's outputs reach its default report: the example continuation study (a
plugin with no rating or report code of its own) rated in the annotation store gets its judge's agreement with the
raters, its human-anchored means and the alternative annotator test, its report card the judge's agreement, and a
rating plan from the same ratings."""

from __future__ import annotations

import math

import mlflow
import numpy as np
import pandas as pd
import pytest

from experiments.report import main as report_main
from narrative_eval import tracking
from narrative_eval.annotations import ENV_PATH, AnnotationStore, Rating
from narrative_eval.errors import cli_main
from narrative_eval.reports.catalog import report_tables, shown_table
from narrative_eval.reports.human_ratings import human_rho
from narrative_eval.stats.alt_test import alternative_annotator_test
from narrative_eval.stats.ppi import human_anchored_mean
from narrative_eval.studies.rating import outputs, rating_item
from narrative_eval.study import load_study
from narrative_eval.tracking.store import TAG_KIND, TAG_SWEEP

SWEEP = "rated-continuation"
ITEMS, SETTINGS = 20, ("plain", "guided")
DIMENSIONS = ("fluency", "coherence", "progression")
RATERS = ("ann", "bob", "cy")


def judged(setting: str, k: int, dimension: str) -> float:
    return float(1 + (k * 3 + len(setting) + DIMENSIONS.index(dimension)) % 5)


def rated(rater: str, setting: str, k: int, dimension: str) -> int:
    """Each rater around the judge: ann and bob a point off now and then, cy more often."""
    offset = {"ann": k % 5 == 0, "bob": -(k % 7 == 3), "cy": (k % 3 == 1) - (k % 4 == 2)}[rater]
    return int(min(5, max(1, judged(setting, k, dimension) + offset)))


def log_cells(sweep: str) -> None:
    """Two finished cells (m x plain, guided) of the continuation study as its loop logs them, without a model:
    judge j scores 20 continuations of one seed each."""
    mlflow.set_tracking_uri(tracking.tracking_uri())
    name = load_study("continuation").experiment
    tracking.end_run(tracking.start_sweep_run(name, sweep, {"sweep": sweep}))
    experiment = mlflow.set_experiment(name)
    for setting in SETTINGS:
        rows = pd.DataFrame([{"item_id": f"story/s{k}/3", "domain": "story", "opening": f"Opening {k}.", "seed": 0,
                              "continuation": f"Sentence {k} of {setting}.", "next_sentence": "True.",
                              "judge/j/status": "ok", **{f"judge/j/{d}": judged(setting, k, d) for d in DIMENSIONS},
                              "judge/j/qavg": float(np.mean([judged(setting, k, d) for d in DIMENSIONS]))}
                             for k in range(ITEMS)])
        with mlflow.start_run(experiment_id=experiment.experiment_id, run_name=f"m-{setting}"):
            mlflow.set_tags({TAG_KIND: "cell", TAG_SWEEP: sweep})
            mlflow.log_params({"model_id": "m", "prompt_setting": setting, "data_sha256": "0" * 64})
            mlflow.log_metrics({"n_seeds": 1.0, "n_items": float(ITEMS), "answered_rate": 1.0,
                                "judge/j/failure_rate": 0.0,
                                "judge/j/qavg": float(rows["judge/j/qavg"].mean())})
            mlflow.log_table(rows, artifact_file="generations.json")


def test_ratings_of_continuations_reach_the_report_and_the_card(tmp_path, monkeypatch):
    study = load_study("continuation")
    log_cells(SWEEP)
    store = AnnotationStore(tmp_path / "annotations.sqlite")
    runs = tracking.sweep_cell_runs(study.experiment, SWEEP)
    for output in outputs(study, runs, lambda run_id: tracking.load_table(run_id, "generations.json")):
        item = rating_item(study, SWEEP, output)  # as the Annotate tab stores it
        store.add_item(item)
        setting, k = output[0]["params.prompt_setting"], int(item.instance_id.split("/s")[1].split("/")[0])
        for rater in RATERS:
            store.save_rating(Rating(item.item_id, rater, "pointwise", (0,),
                                     {d: rated(rater, setting, k, d) for d in DIMENSIONS}))
    monkeypatch.setenv(ENV_PATH, str(store.path))  # the report reads the app's store
    out = tmp_path / "report"
    assert cli_main(report_main, ["continuation", "--sweep", SWEEP, "--out", str(out)]) == 0

    agreement = pd.read_csv(out / "human_agreement_j.csv").set_index("dimension")
    assert list(agreement.index) == [*DIMENSIONS, "Average"] and (agreement.loc["fluency", "n_outputs"] == 40)
    assert {"kappa[ann|bob]", "rho[j|ann]", "rho[j|cy]"} <= set(agreement.columns)

    ppi = pd.read_csv(out / "ppi_j.csv").set_index(["setting", "dimension"])
    row = ppi.loc[("plain", "fluency")]
    judge = np.array([judged("plain", k, "fluency") for k in range(ITEMS)])
    human = np.array([np.mean([rated(r, "plain", k, "fluency") for r in RATERS]) for k in range(ITEMS)])
    expected = human_anchored_mean(judge, human, [f"story/s{k}/3" for k in range(ITEMS)])
    assert (row["n_all"], row["n_rated"]) == (ITEMS, ITEMS)
    assert row["judge"] == pytest.approx(judge.mean(), abs=1e-3)
    assert row["human"] == pytest.approx(human.mean(), abs=1e-3)
    assert row["ppi_lo"] == pytest.approx(expected.ppi.lo, abs=1e-3)

    alt = pd.read_csv(out / "alt_test_j.csv").set_index("dimension").loc["coherence"]
    outputs_in_order = [(s, k) for s in SETTINGS for k in range(ITEMS)]
    matrix = np.array([[rated(r, s, k, "coherence") for s, k in outputs_in_order] for r in RATERS], float)
    test = alternative_annotator_test(matrix, [judged(s, k, "coherence") for s, k in outputs_in_order], RATERS)
    assert (alt["n_raters"], alt["n_outputs"]) == (3, 40)
    assert alt["advantage_probability"] == pytest.approx(test.advantage_probability, abs=1e-3)

    # The tables name the study's rubric's dimensions in its words (the infilling rubric calls its `coherence`
    # "Bidirectional Coherence"), in LaTeX and as the app's Figures tab shows the study's report.
    for name in ("human_agreement_j", "ppi_j", "alt_test_j"):
        latex = (out / f"{name}.tex").read_text()
        assert "Coherence with the opening" in latex and "Bidirectional" not in latex, name
    shown = {table.name: table for table in report_tables(out, study)}
    assert "Coherence with the opening" in shown_table(shown["human_agreement_j"])["Dimension"].tolist()

    card = pd.read_csv(out / "judge_card.csv").set_index("judge")
    assert math.isfinite(card.loc["j", "human_rho"])
    assert card.loc["j", "human_rho"] == pytest.approx(human_rho(agreement.reset_index(), "j"), abs=2e-3)

    # The rating plan reads the same ratings: per cell and dimension, every output rated.
    assert cli_main(report_main, ["rating-plan", "--sweep", SWEEP, "--target-width", "0.5", "--out", str(out)]) == 0
    plan = pd.read_csv(out / "rating_plan_j.csv")
    assert sorted(zip(plan["setting"], plan["dimension"])) == sorted((s, d) for s in SETTINGS for d in DIMENSIONS)
    assert (plan["n_rated"] == ITEMS).all() and (plan["n_all"] == ITEMS).all()
    assert "Coherence with the opening" in (out / "rating_plan_j.tex").read_text()


def test_a_sweep_nobody_rated_has_no_human_tables_and_a_blank_card_column(tmp_path, monkeypatch):
    log_cells("unrated-continuation")
    monkeypatch.setenv(ENV_PATH, str(tmp_path / "none.sqlite"))
    out = tmp_path / "report"
    assert cli_main(report_main, ["continuation", "--sweep", "unrated-continuation", "--out", str(out)]) == 0
    assert not list(out.glob("human_agreement_*")) and not list(out.glob("ppi_*")) and not list(out.glob("alt_test_*"))
    card = pd.read_csv(out / "judge_card.csv").set_index("judge")
    assert math.isnan(card.loc["j", "human_rho"])
