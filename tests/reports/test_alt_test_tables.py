"""alt_test_<judge>.csv in both reports: the alternative annotator test where three raters rated the same outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.report import main as report_main
from narrative_eval.errors import cli_main
from narrative_eval.stats.alt_test import alternative_annotator_test
from narrative_eval.studies.incremental.human_records import PointwiseRating, save_pointwise_ratings
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.score_records import save_score_records
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.infilling.report import write_infilling_report

from tests.reports.test_ppi_tables import PASSAGES, SEEDS, coherence_of, fluency_of, log_infilling_cells, record

COLUMNS = ["dimension", "epsilon", "n_raters", "n_outputs", "winning_rate", "advantage_probability", "passed", "reason"]
STORIES = 20
RATERS = ("ann", "bob", "cy")


def rater_offset(rater: str, story: int) -> int:
    """Each rater's own noise around the truth: ann and bob a point off now and then, cy more often."""
    return {"ann": (story % 5 == 0), "bob": -(story % 7 == 3), "cy": (story % 3 == 1) - (story % 4 == 2)}[rater]


def test_human_validation_report_runs_the_test_with_the_epsilon_asked(tmp_path):
    # One judge scores 20 stories x 2 conditions at the truth; three raters rate all 40 responses around it.
    truth = {(condition, k): 1 + (k * 3 + (condition == "sharded")) % 5 for condition in ("full", "sharded")
             for k in range(STORIES)}
    records = [record("j", condition, k, craft) for (condition, k), craft in truth.items()]
    ratings = [PointwiseRating(ScoreRecord.make_id("m", condition, f"s{k}", 0, "j"), rater,
                               {d: int(min(5, max(1, craft + rater_offset(rater, k)))) for d in QUALITY_FIELDS})
               for (condition, k), craft in truth.items() for rater in RATERS]
    out = tmp_path / "out"
    argv = ["human-validation", "--scores", str(save_score_records(records, tmp_path / "scores.jsonl")),
            "--pointwise", str(save_pointwise_ratings(ratings, tmp_path / "ratings.jsonl")), "--out", str(out),
            "--resamples", "100", "--alt-test-epsilon", "0.1"]
    assert cli_main(report_main, argv) == 0
    table = pd.read_csv(out / "alt_test_j.csv")
    assert list(table.columns) == COLUMNS
    craft = table.set_index("dimension").loc["craft"]
    matrix = np.array([[min(5, max(1, truth[c, k] + rater_offset(r, k))) for c, k in truth] for r in RATERS], float)
    expected = alternative_annotator_test(matrix, [float(v) for v in truth.values()], RATERS, epsilon=0.1)
    assert (craft["epsilon"], craft["n_raters"], craft["n_outputs"]) == (0.1, 3, 40)
    assert craft["winning_rate"] == pytest.approx(expected.winning_rate)
    assert craft["advantage_probability"] == pytest.approx(expected.advantage_probability)
    # The judge at the truth is at least as close to the others as any rater on most responses.
    assert craft["advantage_probability"] > 0.8 and bool(craft["passed"]) is expected.passed
    # Characterization is N/A from every judge: no output the judge scored.
    character = table.set_index("dimension").loc["characterization"]
    assert character["n_raters"] == 0 and "no rater to test" in character["reason"]


def test_infilling_report_runs_the_test_over_the_sweeps_fills(tmp_path):
    sweep = "alt-test-infilling"
    log_infilling_cells(sweep)
    fills = [(setting, p, s) for setting in ("L1", "L2") for p in range(PASSAGES) for s in SEEDS]
    ratings = pd.DataFrame([{"rater": rater, "model": "m", "prompt_setting": setting, "instance_id": f"ds/ref{p}/0/1",
                             "seed": s, "fluency": min(5.0, max(1.0, fluency_of(p, s) + rater_offset(rater, p * 2 + s))),
                             "coherence": coherence_of(p, s) if rater != "cy" else None}
                            for setting, p, s in fills for rater in RATERS])
    ratings.to_csv(tmp_path / "ratings.csv", index=False)
    write_infilling_report(sweep, tmp_path / "out", ratings_csv=tmp_path / "ratings.csv", alt_test_epsilon=0.15)
    table = pd.read_csv(tmp_path / "out" / "alt_test_j.csv").set_index("dimension")
    fluency = table.loc["fluency"]
    judged = [f for f in fills if f != ("L2", 7, 1)]  # that judgment failed
    matrix = np.array([[min(5.0, max(1.0, fluency_of(p, s) + rater_offset(r, p * 2 + s))) for _, p, s in judged]
                       for r in RATERS])
    expected = alternative_annotator_test(matrix, [fluency_of(p, s) for _, p, s in judged], RATERS, epsilon=0.15)
    assert (fluency["n_raters"], fluency["n_outputs"], fluency["epsilon"]) == (3, 31, 0.15)
    assert fluency["winning_rate"] == pytest.approx(expected.winning_rate)
    assert fluency["advantage_probability"] == pytest.approx(expected.advantage_probability)
    # Only two people rated coherence: the test asks for three.
    assert table.loc["coherence", "n_raters"] == 0 and "at most 2" in table.loc["coherence", "reason"]
