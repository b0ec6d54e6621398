"""A tiny infilling sweep lands in a real (temporary) MLflow store, and a rerun does no work."""

from __future__ import annotations

import json
import mlflow
import pandas as pd
import pytest

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.sweep import AFTER_CELLS, CHECKS_STEP, expand_grid, progress_plan, run_sweep
from tests import shared_sweeps

# On one xdist worker with tests/tracing/test_evaluation_records.py, whose sweep asks this one's L2 cell again.
pytestmark = pytest.mark.xdist_group(shared_sweeps.INFILLING_GROUP)
PUBLISHED_COLUMNS = ["dataset", "ref_id", "source_text", "problem", "gold_answer", "unit", "n", "unit_idx"]


@pytest.fixture(scope="module")
def published_csv(tmp_path_factory, repo_root):
    """Shipped instances written exactly as the published benchmark file is: pandas CSV with its index column."""
    frame = pd.read_json(repo_root / "data/infilling/sample.jsonl", lines=True)[PUBLISHED_COLUMNS]
    path = tmp_path_factory.mktemp("published") / "narrative_infilling.csv"
    frame.to_csv(path)
    return path


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory, repo_root, published_csv):
    path = tmp_path_factory.mktemp("cfg") / "tiny.yaml"
    path.write_text(
        f"""
study: infilling
sweep: tiny-{path.parent.name}
data: {published_csv}
prompt_settings: [L1, L2]
report_dir: {path.parent / 'report'}
""" + shared_sweeps.config_lines(shared_sweeps.INFILLING)
    )
    return load_config(path, catalog=repo_root / "experiments/configs/models.yaml")


REPORTED: list[str] = []
"""What the first run reported to its progress display, in order."""


def recorded(items, description, total=None):
    REPORTED.append(description)
    return items


@pytest.fixture(scope="module")
def first_run(tiny_config):
    return run_sweep(tiny_config, progress=recorded)


def test_a_sweep_reports_the_stages_its_plan_names(first_run, tiny_config):
    """The Launch tab shows a sweep's stages ahead from its plan: the sweep reports exactly those, in order."""
    cell_stages, after = progress_plan(tiny_config)
    assert cell_stages == ["generate", "score", "judge tiny-judge"]
    for cell in expand_grid(tiny_config):
        prefix = f"{cell.run_name}: "
        assert [d.removeprefix(prefix) for d in REPORTED if d.startswith(prefix)] == cell_stages
    reported = [d for d in REPORTED if d.startswith(AFTER_CELLS)]
    # The control checks judge in several stages (one per judge and rubric), each reported as that one step after the
    # cells, never as a stage of the last cell.
    assert after[0] == CHECKS_STEP and reported.count(f"{AFTER_CELLS}: {CHECKS_STEP}") >= 1
    assert [d for i, d in enumerate(reported) if not i or d != reported[i - 1]] == [f"{AFTER_CELLS}: {step}"
                                                                                    for step in after]
    assert REPORTED[0] == "cells" and REPORTED[-1] == f"{AFTER_CELLS}: {after[-1]}"


def test_grid_is_models_times_settings(tiny_config):
    cells = expand_grid(tiny_config)
    assert [(c.model.id, c.prompt_setting) for c in cells] == [("smollm2", "L1"), ("smollm2", "L2")]
    assert len({c.spec_hash for c in cells}) == 2
    assert all(c.seeds == (0, 1) for c in cells)


def test_sweep_logs_cells_under_parent(first_run, tiny_config):
    assert first_run.count("finished") == 2 and first_run.count("failed") == 0
    runs = tracking.sweep_cell_runs("infilling", tiny_config.sweep)
    assert len(runs) == 2
    assert set(runs["tags.mlflow.parentRunId"]) == {first_run.parent_run_id}
    for _, run in runs.iterrows():
        for name in ("bertscore", "rouge1", "meteor", "chrf", "semf1", "at_avg", "extraction_success_rate"):
            assert f"metrics.{name}" in run and run[f"metrics.{name}"] == run[f"metrics.{name}"], name
        # Seed variance lives inside the run: one value per seed plus mean and SD.
        assert {"metrics.seed0/at_avg", "metrics.seed1/at_avg", "metrics.at_avg_sd"} <= set(run.index)
        mean = (run["metrics.seed0/at_avg"] + run["metrics.seed1/at_avg"]) / 2
        assert run["metrics.at_avg"] == pytest.approx(mean)
        assert "metrics.judge/tiny-judge/qavg" in run or "metrics.judge/tiny-judge/failure_rate" in run
        assert run["params.spec_hash"] and run["params.data_sha256"] and run["params.judges"] == '["tiny-judge"]'


def test_generations_table_has_one_row_per_instance_and_seed(first_run, tiny_config):
    runs = tracking.sweep_cell_runs("infilling", tiny_config.sweep)
    table = tracking.load_table(runs.iloc[0]["run_id"], "generations.json")
    assert len(table) == 2 * 2  # two instances, two seeds
    for column in ("instance_id", "seed", "messages", "raw_reply", "answer", "extraction_status", "gold", "bertscore"):
        assert column in table.columns
    assert set(table["extraction_status"]) <= {"tag", "echo", "fallback", "none"}
    assert "judge/tiny-judge/status" in table.columns


def test_report_written_and_attached_to_parent(first_run, tiny_config):
    assert (first_run.report_dir / "main.csv").exists()
    assert "AtAvg per model x prompt setting" in first_run.tables
    artifacts = [a.path for a in tracking.client().list_artifacts(first_run.parent_run_id, "report")]
    assert "report/main.csv" in artifacts and "report/report_source.json" in artifacts
    assert json.loads((first_run.report_dir / "report_source.json").read_text()) == {"study": "infilling",
                                                                                     "sweep": tiny_config.sweep}


def test_the_embedded_judge_is_checked_once_on_control_items(first_run):
    """Its two instances' gold fills against another passage's gold, a repeated sentence and themselves padded with
    neutral filler: a row per check in judge_checks.csv and its verdict as a tag on the parent run and both cells,
    whatever this small judge earns."""
    table = pd.read_csv(first_run.report_dir / "judge_checks.csv")
    assert list(table["check"]) == ["mismatched_fill", "degenerate_fill", "padded_output"]
    assert set(table["judge"]) == {"tiny-judge"}
    assert list(table["n"] + table["n_failed"]) == [2, 2, 2]
    measured = table[table["n"] > 0]
    assert ((0 <= measured["lo"]) & (measured["lo"] <= measured["value"]) & (measured["value"] <= measured["hi"])
            & (measured["hi"] <= 1)).all()
    failed = list(table.loc[~table["pass"], "check"])
    verdict = f"fail: {', '.join(failed)}" if failed else "pass"
    for run_id in [first_run.parent_run_id, *(cell.run_id for cell in first_run.cells)]:
        assert tracking.client().get_run(run_id).data.tags["judge_check/tiny-judge"] == verdict


def test_rerun_skips_finished_cells_and_generates_nothing(first_run, tiny_config):
    again = run_sweep(tiny_config)
    assert again.parent_run_id == first_run.parent_run_id
    assert again.count("skipped") == 2 and again.generated == 0
    assert len(tracking.sweep_cell_runs("infilling", tiny_config.sweep, finished_only=False)) == 2
    assert mlflow.get_run(first_run.parent_run_id).info.status == "FINISHED"


def test_dry_run_counts_without_loading_models(repo_root, published_csv, capsys):
    from experiments.sweep import main

    from narrative_eval.backends import registry
    from narrative_eval.data import load_instances
    from narrative_eval.studies.infilling.subset import stratified_subset

    loaded = len(registry._loaded)
    assert main(["--config", str(repo_root / "experiments/configs/seed_variance.yaml"), "--dry-run",
                 "--data", str(published_csv)]) == 0
    out = capsys.readouterr().out
    subset = len(stratified_subset(load_instances(published_csv), fraction=0.1, seed=42))
    # 4 models x 2 prompt settings, five seeds inside each cell, one judge; and once per sweep, that judge on every
    # subset instance's gold fill, another passage's gold, a repeated sentence and the padded gold (judge_checks:
    # 20 >= subset).
    assert "8 cells" in out
    controls = 4 * subset
    assert f"generations: {8 * 5 * subset}" in out
    assert f"judge calls: {8 * 5 * subset + controls} (1 judge(s); {controls} on control items" in out
    assert len(registry._loaded) == loaded  # no model was loaded


def test_report_reads_human_ratings_csv(first_run, tiny_config, tmp_path):
    """Two raters' scores of the sweep's outputs give the human-agreement table (Table 2 of the study)."""
    from experiments.report import main as report_main

    runs = tracking.sweep_cell_runs("infilling", tiny_config.sweep)
    rows = []
    for _, run in runs.iterrows():
        for k, gen in tracking.load_table(run["run_id"], "generations.json").iterrows():
            for rater, score in (("ann", 1 + k % 5), ("bob", 1 + (k + k % 2) % 5)):
                rows.append({"rater": rater, "model": run["params.model_id"], "prompt_setting": run["params.prompt_setting"],
                             "instance_id": gen["instance_id"], "seed": gen["seed"], "fluency": score, "coherence": score})
    ratings = tmp_path / "ratings.csv"
    pd.DataFrame(rows).to_csv(ratings, index=False)
    assert report_main(["infilling", "--sweep", tiny_config.sweep, "--out", str(tmp_path / "out"), "--ratings", str(ratings)]) == 0
    table = pd.read_csv(tmp_path / "out" / "human_agreement_tiny-judge.csv")
    assert list(table["dimension"])[-1] == "Average"
    fluency = table.set_index("dimension").loc["fluency"]
    assert fluency["n_outputs"] == len(rows) / 2 and -1 <= fluency["kappa[ann|bob]"] <= 1
    assert "rho[tiny-judge|ann]" in table.columns
