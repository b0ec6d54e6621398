"""ppi_<judge>.csv in both reports: judge-only, human-only and prediction-powered means of rated cells."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest

from narrative_eval import tracking
from narrative_eval.stats.ppi import human_anchored_mean
from narrative_eval.studies.incremental.human_records import PointwiseRating, save_pointwise_ratings
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.report_human import write_human_validation_report
from narrative_eval.studies.incremental.score_records import save_score_records
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.infilling.report import write_infilling_report
from narrative_eval.studies.infilling.vocabulary import NAME as EXPERIMENT
from narrative_eval.tracking.store import TAG_KIND, TAG_SWEEP

COLUMNS = ["dimension", "n_all", "n_rated", "judge", "judge_lo", "judge_hi", "human", "human_lo", "human_hi",
           "ppi", "ppi_lo", "ppi_hi", "ppi_tuned", "ppi_tuned_lo", "ppi_tuned_hi", "lambda", "reason"]
PASSAGES, SEEDS = 8, (0, 1)
RATED_PASSAGES = 5
"""Infilling: people rated seed 0 of the first five passages' fills, in setting L2 only."""


def fluency_of(passage: int, seed: int) -> float:
    return float(1 + (passage * 3 + seed * 2) % 5)


def coherence_of(passage: int, seed: int) -> float:
    return float(1 + (passage + seed) % 4)


def log_infilling_cells(sweep: str) -> None:
    """Two finished cells (m x L1, L2) as a sweep logs them, without running a model: judge j scores fluency and
    coherence of 8 passages x 2 seeds; its judgment of passage 7, seed 1 in L2 failed."""
    mlflow.set_tracking_uri(tracking.tracking_uri())
    experiment = mlflow.set_experiment(EXPERIMENT)
    for setting in ("L1", "L2"):
        rows = []
        for passage in range(PASSAGES):
            for seed in SEEDS:
                failed = setting == "L2" and (passage, seed) == (7, 1)
                fluency, coherence = fluency_of(passage, seed), coherence_of(passage, seed)
                rows.append({"instance_id": f"ds/ref{passage}/0/1", "seed": seed, "domain": "news", "position": "middle",
                             "answer": "a fill", "gold": "gold", "rouge1": 0.1 * (passage % 4),
                             "judge/j/status": "failed" if failed else "ok",
                             "judge/j/fluency": None if failed else fluency,
                             "judge/j/coherence": None if failed else coherence,
                             "judge/j/qavg": None if failed else (fluency + coherence) / 2})
        with mlflow.start_run(experiment_id=experiment.experiment_id, run_name=f"m-{setting}"):
            mlflow.set_tags({TAG_KIND: "cell", TAG_SWEEP: sweep})
            mlflow.log_params({"model_id": "m", "prompt_setting": setting, "data_sha256": "0" * 64})
            judged = pd.DataFrame(rows)
            mlflow.log_metrics({"n_seeds": 2.0, "n_instances": float(PASSAGES),
                                **{f"judge/j/{d}": float(judged[f"judge/j/{d}"].mean()) for d in ("fluency", "coherence", "qavg")}})
            mlflow.log_table(judged, artifact_file="generations.json")


def test_infilling_report_writes_ppi_for_the_rated_cell(tmp_path):
    sweep = "ppi-infilling"
    log_infilling_cells(sweep)
    ratings = pd.DataFrame(
        [{"rater": rater, "model": "m", "prompt_setting": "L2", "instance_id": f"ds/ref{p}/0/1", "seed": 0,
          "fluency": fluency_of(p, 0) - 1 + offset, "coherence": None}
         for p in range(RATED_PASSAGES) for rater, offset in (("ann", 0.0), ("bob", 1.0))])
    ratings["fluency"] = ratings["fluency"].clip(1, 5)
    ratings.to_csv(tmp_path / "ratings.csv", index=False)
    write_infilling_report(sweep, tmp_path / "out", ratings_csv=tmp_path / "ratings.csv")

    table = pd.read_csv(tmp_path / "out" / "ppi_j.csv")
    assert list(table.columns) == ["model", "setting", *COLUMNS]
    assert set(table["setting"]) == {"L2"}  # nobody rated L1: no row to anchor
    rows = table.set_index("dimension")
    fluency = rows.loc["fluency"]
    judged = [(p, s) for p in range(PASSAGES) for s in SEEDS if (p, s) != (7, 1)]
    judge = np.array([fluency_of(p, s) for p, s in judged])
    human = np.array([ratings.loc[ratings["instance_id"] == f"ds/ref{p}/0/1", "fluency"].mean() if s == 0 and p < RATED_PASSAGES
                      else np.nan for p, s in judged])
    rated = ~np.isnan(human)
    assert (fluency["n_all"], fluency["n_rated"]) == (15, RATED_PASSAGES)
    assert fluency["judge"] == pytest.approx(judge.mean())
    assert fluency["human"] == pytest.approx(human[rated].mean())
    assert fluency["ppi"] == pytest.approx(judge.mean() + (human[rated] - judge[rated]).mean())
    # The intervals are the estimator's on the same outputs, clustered by passage.
    expected = human_anchored_mean(judge, human, [p for p, _ in judged])
    assert (fluency["ppi_lo"], fluency["ppi_hi"]) == (pytest.approx(expected.ppi.lo), pytest.approx(expected.ppi.hi))
    assert (fluency["human_lo"], fluency["judge_hi"]) == (pytest.approx(expected.human.lo), pytest.approx(expected.judge.hi))
    coherence = rows.loc["coherence"]
    assert coherence["n_rated"] == 0 and coherence["reason"] == "no rated output" and np.isnan(coherence["ppi"])
    assert "ppi" in (tmp_path / "out" / "ppi_j.md").read_text()
    assert "Bidirectional Coherence" in (tmp_path / "out" / "ppi_j.tex").read_text()  # its rubric's words


def record(judge: str, condition: str, story: int, craft: float) -> ScoreRecord:
    quality = {d: craft for d in QUALITY_FIELDS}
    quality["characterization"] = None  # N/A from every judge
    return ScoreRecord(record_id=ScoreRecord.make_id("m", condition, f"s{story}", 0, judge), story_id=f"s{story}",
                       genre="g", model="m", condition=condition, judge=judge,
                       adherence=[{"constraint_id": "c1", "score": 1.0}], quality=quality)


def test_human_validation_report_writes_ppi_per_judge(tmp_path):
    # Two judges score 6 stories x 2 conditions; j2 is j1 one point higher. People rated stories s0-s2 under
    # FULL and s0 under SHARDED, naming j1's record ids; j2's table finds the same responses.
    crafts = {("full", k): 2 + k % 3 for k in range(6)} | {("sharded", k): 1 + k % 4 for k in range(6)}
    records = [record(judge, condition, k, craft + bump)
               for judge, bump in (("j1", 0), ("j2", 1)) for (condition, k), craft in crafts.items()]
    rated = [("full", 0), ("full", 1), ("full", 2), ("sharded", 0)]
    ratings = [PointwiseRating(ScoreRecord.make_id("m", condition, f"s{k}", 0, "j1"), rater,
                               {d: min(5, crafts[condition, k] + shift) for d in QUALITY_FIELDS})
               for condition, k in rated for rater, shift in (("ann", 1), ("bob", 0))]
    out = tmp_path / "out"
    write_human_validation_report(out, scores=save_score_records(records, tmp_path / "scores.jsonl"),
                                  pointwise=save_pointwise_ratings(ratings, tmp_path / "ratings.jsonl"), n_boot=200)
    for judge, bump in (("j1", 0), ("j2", 1)):
        table = pd.read_csv(out / f"ppi_{judge}.csv")
        assert list(table.columns) == ["model", "condition", *COLUMNS]
        craft = table[table["dimension"] == "craft"].set_index("condition").loc["full"]
        judge_scores = np.array([crafts["full", k] + bump for k in range(6)], dtype=float)
        human = np.array([np.mean([min(5, crafts["full", k] + s) for s in (1, 0)]) for k in range(3)])
        assert (craft["n_all"], craft["n_rated"]) == (6, 3)
        assert craft["judge"] == pytest.approx(judge_scores.mean(), abs=1e-6)
        assert craft["human"] == pytest.approx(human.mean(), abs=1e-6)
        # The judge's bump is corrected away: both judges give the same prediction-powered mean.
        assert craft["ppi"] == pytest.approx(judge_scores.mean() + (human - judge_scores[:3]).mean(), abs=1e-6)
        sharded = table[table["dimension"] == "craft"].set_index("condition").loc["sharded"]
        assert sharded["n_rated"] == 1 and "fewer than two clusters" in sharded["reason"]
        character = table[table["dimension"] == "characterization"].set_index("condition").loc["full"]
        assert character["n_all"] == 0 and character["reason"] == "no output with a judge score"
    j1, j2 = (pd.read_csv(out / f"ppi_{j}.csv").set_index(["condition", "dimension"]) for j in ("j1", "j2"))
    assert j1.loc[("full", "craft"), "ppi"] == pytest.approx(j2.loc[("full", "craft"), "ppi"], abs=1e-6)
