"""The example continuation study (examples/continuation/), installed by the test install as any plugin would be:
the commands find it with no change to the platform. Listed, counted in a dry run, a tiny sweep with the embedded
SmolLM2 (one MLflow run per cell, metrics, traces and dataset input, the judge's control checks: all from the
library's single-turn loop), a rerun that does no work, its report, and the app's Runs tab. The sweep is the session's
shared one (tests/shared_sweeps.py), which the app's Launch test also uses."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io

import mlflow
import pandas as pd
import pytest

from experiments import report, sweep
from narrative_eval import tracking
from narrative_eval.data.instances import load_instances, sentences
from narrative_eval.errors import UserError
from narrative_eval.registry import PLUGIN_GROUP
from narrative_eval.reports.catalog import REPORT_SOURCE, report_sweep, study_of_report
from narrative_eval.reports.labels import label
from tests.shared_sweeps import CONTINUATION, tracking_store
from ui.common import STUDIES
from ui.runs import ALL_JUDGES, MEAN, runs_frame

pytestmark = pytest.mark.slow

SETTINGS = CONTINUATION["prompt_settings"]
JUDGE = CONTINUATION["judges"][0]


def run(command, *argv: str) -> tuple[int, str]:
    """A command's main(argv): its exit code and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = command.main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module", autouse=True)
def in_the_apps_store(app_env):
    """The shared sweep went into the app's tracking store (the app's Launch test adds to it): read it there."""
    with tracking_store(app_env):
        yield


@pytest.fixture(scope="module")
def config(continuation_sweep):
    return continuation_sweep.config


@pytest.fixture(scope="module")
def swept(continuation_sweep):
    """The shared sweep (tests/shared_sweeps.py), run once through the command line, then its cell runs from MLflow."""
    name = continuation_sweep.name
    return name, continuation_sweep.printed, tracking.sweep_cell_runs("continuation", name)


def test_the_plugin_is_installed_and_listed_after_the_project_studies():
    points = [p for p in importlib.metadata.entry_points(group=PLUGIN_GROUP) if p.value == "narrative_eval_continuation"]
    assert points, "examples/continuation is not installed (make install-test installs it)"
    code, listed = run(sweep, "--list")
    assert code == 0
    assert "  continuation  [plugin narrative-eval-continuation: narrative_eval_continuation.study]" in listed
    assert "  continuation_quality  [plugin narrative-eval-continuation: " in listed
    # Its own prompt settings and its one condition, beside the project's studies' grids, defaults starred.
    assert "  continuation prompt_settings: plain* guided" in listed
    assert "  continuation conditions: standard*" in listed
    assert "  incremental-delivery conditions: full* sharded* recap snowball" in listed
    assert STUDIES[0] == "infilling" and "continuation" in STUDIES  # the Runs tab's default study is unchanged


def test_a_dry_run_counts_the_grid(config):
    code, printed = run(sweep, "--config", str(config), "--dry-run")
    assert code == 0
    assert "(continuation): 2 cells" in printed
    # Two continuations per cell judged, and the generic control items of the library's single-turn loop: each of
    # the two items' true sentence, another item's, a blank one, the refusal and the true one padded, judged once each.
    assert "generations: 4" in printed and "judge calls: 14 (1 judge(s); 10 on control items" in printed


def test_a_config_with_a_setting_of_another_study_is_refused(config):
    with pytest.raises(UserError, match="'L2' is not a prompt setting of the continuation study"):
        sweep.main(["--config", str(config), "--set", "prompt_settings=[L2]", "--dry-run"])


def test_one_run_per_cell_with_metrics_traces_and_dataset(swept, repo_root):
    _, _, runs = swept
    assert sorted(runs["params.prompt_setting"]) == sorted(SETTINGS) and set(runs["status"]) == {"FINISHED"}
    passages = {f"{i.dataset}/{i.ref_id}/3": sentences(i.source_text)[3]
                for i in load_instances(repo_root / "data/infilling/sample.jsonl")}
    for _, cell in runs.iterrows():
        assert cell["metrics.n_items"] == 2
        for name in ("at_avg", "chrf", "rouge1", "bertscore", f"judge/{JUDGE}/qavg", f"judge/{JUDGE}/high_pct"):
            assert 0 <= cell[f"metrics.{name}"] <= (100 if name.endswith("high_pct") else 5), name
        table = tracking.load_table(cell["run_id"], "generations.json")
        assert len(table) == 2 and table["continuation"].str.len().min() > 0
        assert all(passages[row.item_id] == row.next_sentence for row in table.itertuples())  # the true 4th sentence
        traces = mlflow.search_traces(locations=[cell["experiment_id"]], run_id=cell["run_id"], return_type="list")
        assert len(traces) == 2
        names = {assessment.name for assessment in traces[0].info.assessments}
        assert {"next_sentence", "chrf", f"{JUDGE}/coherence", f"{JUDGE}/qavg"} <= names
        run = tracking.client().get_run(cell["run_id"])
        assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["sample.jsonl"]
        assert "rubric.continuation_quality/1" in run.data.tags["narrative_eval.prompt_versions"]


def test_its_judge_is_checked_on_control_items_without_code_of_its_own(swept, config):
    checks = pd.read_csv(config.parent / "report" / "judge_checks.csv")
    assert set(checks["judge"]) == {JUDGE} and set(checks["rubric"]) == {"continuation_quality"}
    # The judge sees the opening: another passage's true sentence is a wrong one here. A one-sentence answer has no
    # order to shuffle, so its scores rubric gets the refusal and the padded answer beside them.
    assert {"mismatched_reference", "blank_answer", "refusal", "padded_output"} == set(checks["check"])
    assert (checks["n"] == 2).all()


def test_a_rerun_skips_every_cell(swept, config):
    code, printed = run(sweep, "--config", str(config), "--no-progress")
    assert code == 0 and "cells: 0 finished, 2 already done (skipped)" in printed
    assert "requests sent to engines: 0" in printed


def test_the_report_command_writes_its_tables(swept, tmp_path):
    name, _, runs = swept
    code, printed = run(report, "continuation", "--sweep", name, "--out", str(tmp_path))
    assert code == 0 and "Continuations beside the true next sentence" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([REPORT_SOURCE, *(
        f"{table}.{ext}" for table in ("main", "continuations", "judge_checks", "judge_card")
        for ext in ("csv", "md", "tex"))])
    # The folder says whose report it is: the app reads it with the study's titles, not infilling's (whose main table
    # has the same name).
    assert study_of_report(tmp_path).name == "continuation" and report_sweep(tmp_path) == name
    main = pd.read_csv(tmp_path / "main.csv")
    assert sorted(main["setting"]) == sorted(SETTINGS) and set(main["model"]) == {"smollm2"}
    by_setting = runs.set_index("params.prompt_setting")
    for row in main.itertuples():
        assert row.chrf == pytest.approx(by_setting.loc[row.setting, "metrics.chrf"], abs=1e-6)
    continuations = pd.read_csv(tmp_path / "continuations.csv")
    assert len(continuations) == 4 and continuations["continuation"].notna().all()
    assert f"judge/{JUDGE}/qavg" in continuations.columns


def test_the_runs_tab_shows_its_headline_columns(swept):
    _, _, runs = swept
    table = runs_frame(runs, MEAN, ALL_JUDGES, study="continuation")
    assert sorted(table["setting"]) == sorted(SETTINGS)
    headlines = ("at_avg", "chrf", "rouge1", f"judge/{JUDGE}/qavg", f"judge/{JUDGE}/high_pct")
    assert {label(name) for name in headlines} <= set(table.columns)
    assert table["AtAvg"].notna().all()
