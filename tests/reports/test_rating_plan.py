"""python -m experiments.report rating-plan: the ratings each cell of a sweep still needs, from MLflow and people's
ratings so far."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.report import main as report_main
from narrative_eval import tracking
from narrative_eval.errors import cli_main
from narrative_eval.stats.rating_plan import rating_plan
from narrative_eval.studies.infilling.vocabulary import NAME as EXPERIMENT

from tests.reports.test_ppi_tables import PASSAGES, SEEDS, fluency_of, log_infilling_cells

def logged_sweep(sweep: str) -> None:
    """The infilling cells of tests/reports/test_ppi_tables.py under a sweep's parent run."""
    tracking.end_run(tracking.start_sweep_run(EXPERIMENT, sweep, {"sweep": sweep}))
    log_infilling_cells(sweep)


COLUMNS = ["model", "setting", "dimension", "n_all", "n_rated", "target_width", "width", "ppi_needed", "ppi_more",
           "human_needed", "human_more", "judge_width", "judge_outputs_needed", "judge_bias", "reason"]


def test_the_plan_of_every_cell_from_the_ratings_so_far(tmp_path, capsys):
    sweep = "plan-infilling"
    logged_sweep(sweep)
    # People rated 6 of L2's 16 fills (both seeds of passages 0-2), a point below the judge now and then.
    rated = [(p, s) for p in range(3) for s in SEEDS]
    ratings = pd.DataFrame([{"rater": rater, "model": "m", "prompt_setting": "L2", "instance_id": f"ds/ref{p}/0/1",
                             "seed": s, "fluency": max(1.0, fluency_of(p, s) - (p + s + k) % 2)}
                            for p, s in rated for k, rater in enumerate(("ann", "bob"))])
    ratings.to_csv(tmp_path / "ratings.csv", index=False)
    out = tmp_path / "plan"
    argv = ["rating-plan", "--sweep", sweep, "--target-width", "1.5", "--ratings", str(tmp_path / "ratings.csv"),
            "--out", str(out)]
    assert cli_main(report_main, argv) == 0
    table = pd.read_csv(out / "rating_plan_j.csv")
    assert list(table.columns) == COLUMNS
    row = table[(table["setting"] == "L2") & (table["dimension"] == "fluency")].iloc[0]
    judged = [(p, s) for p in range(PASSAGES) for s in SEEDS if (p, s) != (7, 1)]
    human = [ratings[(ratings["instance_id"] == f"ds/ref{p}/0/1") & (ratings["seed"] == s)]["fluency"].mean()
             if (p, s) in rated else math.nan for p, s in judged]
    expected = rating_plan([fluency_of(p, s) for p, s in judged], human, 1.5, [p for p, _ in judged])
    assert (row["n_all"], row["n_rated"]) == (15, 6)
    assert row["ppi_needed"] == expected.ppi_needed and row["ppi_more"] == max(expected.ppi_needed - 6, 0)
    assert row["human_needed"] == expected.human_needed
    assert row["judge_width"] == pytest.approx(expected.judge_width, abs=1e-3)
    # Nobody rated L1: its rows have nothing to plan from, and say so.
    l1 = table[table["setting"] == "L1"]
    assert l1["ppi_needed"].isna().all() and l1["reason"].str.contains("no rated output").all()
    assert "Rating plan for an interval of width 1.5 [j]" in capsys.readouterr().out


def test_mistakes_are_error_lines(tmp_path, capsys):
    logged_sweep("plan-mistakes")
    assert cli_main(report_main, ["rating-plan", "--sweep", "plan-mistakes", "--target-width", "0",
                                  "--out", str(tmp_path)]) == 2
    assert "error: --target-width must be a positive width, not 0" in capsys.readouterr().err
    assert cli_main(report_main, ["rating-plan", "--sweep", "no-such", "--target-width", "1"]) == 2
    assert "no sweep named 'no-such'" in capsys.readouterr().err
