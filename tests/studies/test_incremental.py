"""The incremental-delivery study on the real embedded model: cells, truncation handling, and a tiny sweep's report."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import mlflow
import pytest

from narrative_eval import tracking
from narrative_eval.backends.cache import CachedBackend
from narrative_eval.config import load_config
from narrative_eval.multi_turn import Conversation
from narrative_eval.records import CellSpec, GenerationParams, JudgeSpec
from narrative_eval.records.keys import interval_keys
from narrative_eval.reports.tables import missing_tables
from narrative_eval.studies.incremental import IncrementalDeliveryStudy
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.report import PAIRED_TABLES
from narrative_eval.studies.incremental.tasks import load_tasks
from narrative_eval.study import Runtime
from narrative_eval.sweep import run_sweep
from tests import shared_sweeps

REPO = Path(__file__).resolve().parents[2]
TASKS_JSON = REPO / "data" / "creative" / "tasks.json"
CONSTRAINTS = REPO / "data" / "creative" / "constraints.jsonl"
# On one xdist worker with tests/ui/test_annotate_stories.py, which asks tiny_sweep's first task again (tests/shared_sweeps.py).
pytestmark = pytest.mark.xdist_group(shared_sweeps.CREATIVE_GROUP)
REPORT_FILES = ("model_ci.csv", "paired_effects.csv", "equal_adherence.csv", "equal_genre.csv", "model_effects.csv", "model_effects.png")

MISSING_ENTRY = ", ".join(PAIRED_TABLES) + " not written"
"""The report's entry for its paired tables when there is no pair: one entry, one reason."""


@pytest.fixture(scope="module")
def runtime(smollm2):
    """Every model spec is served by the session's real SmolLM2 engine (no cache: every request runs)."""
    pytest.importorskip("llama_cpp")
    wrapped = CachedBackend(smollm2, None)
    return Runtime(backend_for=lambda spec: wrapped)


def make_cell(spec, condition: str, generation: GenerationParams, judges=(), limit=2, **extra) -> CellSpec:
    return CellSpec(
        study="incremental-delivery",
        sweep="unit",
        model=spec,
        prompt_setting="default",
        condition=condition,
        seeds=(0,),
        generation=generation,
        judges=tuple(judges),
        data_path=str(TASKS_JSON),
        data_sha256="-",
        limit=limit,
        extra={"constraints": str(CONSTRAINTS), **extra},
    )


def test_truncated_trajectories_are_regenerated_then_left_unscored(runtime, smollm2_spec):
    judge = JudgeSpec(id="smol-judge", model=smollm2_spec)
    cell = make_cell(smollm2_spec, "sharded", GenerationParams(temperature=0.8, max_new_tokens=3), judges=[judge], max_regenerations=1)
    result = IncrementalDeliveryStudy().run_cell(cell, runtime)

    attempts = result.artifacts["trajectories.json"]
    assert [(a["story_id"], a["attempt"], a["kept"]) for a in attempts] == [
        ("fantasy_001", 0, False), ("fantasy_002", 0, False), ("fantasy_001", 1, True), ("fantasy_002", 1, True)
    ]
    assert all(a["truncated"] for a in attempts)
    assert result.artifacts["score_records.json"] == []
    assert result.metrics["truncated_rate"] == 1.0 and result.metrics["seed0/truncated_rate"] == 1.0
    assert result.metrics["regenerated_rate"] == 1.0
    assert "judge/smol-judge/adherence" not in result.metrics  # nothing was judged, so nothing is reported as a score
    rows = result.tables["conversations.json"]
    assert [(r["story_id"], r["turn"], r["final"], r["finish_reason"], r["attempt"]) for r in rows] == [
        ("fantasy_001", 0, False, "length", 1), ("fantasy_002", 0, False, "length", 1)
    ]
    assert result.generated == 4  # two attempts x two tasks, one turn each, no judge call


def creative_sweep(root: Path, sweep: str, repo_root: Path, settings: str):
    """Both conditions of the embedded SmolLM2 on the shipped tasks through the real sweep runner and MLflow store,
    with `settings` (YAML lines) added, its report in root/report; the study's cells and report are what is tested,
    so no control items (tests/test_sweep_judge_checks.py has them). Returns the sweep's outcome."""
    path = root / f"{sweep}.yaml"
    path.write_text(f"""study: incremental-delivery
sweep: {sweep}
data: {TASKS_JSON}
constraints: {CONSTRAINTS}
models: [smollm2]
prompt_settings: [default]
conditions: [full, sharded]
report_dir: {root / 'report'}
judge_checks: false
""" + textwrap.dedent(settings))
    return run_sweep(load_config(path, catalog=repo_root / "experiments/configs/models.yaml"))


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory, repo_root):
    """Both conditions of one embedded model through the real sweep runner and MLflow store, judged, with its report."""
    pytest.importorskip("llama_cpp")
    root = tmp_path_factory.mktemp("creative-tiny")
    outcome = creative_sweep(root, f"creative-tiny-{root.name}", repo_root, "limit: 2\n" + shared_sweeps.config_lines(shared_sweeps.CREATIVE))
    return outcome, root / "report"


@pytest.mark.slow
def test_cell_logs_conversations_scores_and_seed_metrics(tiny_sweep):
    """The sharded cell of the sweep, as it landed in MLflow (once a cell of its own, run outside the sweep: the same
    cell, so every check of that test is made here on the sweep's copy)."""
    outcome, _ = tiny_sweep
    [cell] = [c for c in outcome.cells if c.cell.condition == "sharded"]
    metrics = tracking.client().get_run(cell.run_id).data.metrics
    rows = tracking.load_table(cell.run_id, "conversations.json")
    assert len(rows) == 7 + 7  # fantasy_001 and fantasy_002 each have seven shards
    assert rows["final"].sum() == 2
    records = [ScoreRecord(**r) for r in tracking.load_json_artifact(cell.run_id, "score_records.json")]
    checklists = {t.story_id: [c.constraint_id for c in t.constraints] for t in load_tasks(TASKS_JSON, CONSTRAINTS)}
    for record in records:
        assert record.condition == "sharded" and record.model == "smollm2" and record.judge == "smollm2-judge"
        assert record.record_id == f"smollm2/sharded/{record.story_id}/seed0/smollm2-judge"
        # Judged against the whole checklist, whatever shard each requirement arrived in.
        assert [item["constraint_id"] for item in record.adherence] == checklists[record.story_id]
    judgments = tracking.load_json_artifact(cell.run_id, "judgments.json")
    assert len(judgments) == 2 and all(j["judge"] == "smollm2-judge" for j in judgments)
    failure = metrics["judge/smollm2-judge/failure_rate"]
    assert failure == pytest.approx(1 - len(records) / 2)
    for dim in ("adherence", "craft", "structure_coherence", "ci"):
        if records:
            assert f"seed0/judge/smollm2-judge/{dim}" in metrics
            assert f"judge/smollm2-judge/{dim}_sd" not in metrics  # one seed: no SD
    # An interval drawing stories for each number that two stories have a value of (one story gives none).
    finals = rows[rows["final"]]
    for dim in ("adherence", "craft", "structure_coherence", "ci"):
        key = f"judge/smollm2-judge/{dim}"
        low, high = interval_keys(key)
        if key in finals and finals[key].notna().sum() == 2:
            assert metrics[low] <= metrics[key] <= metrics[high]
        else:
            assert low not in metrics and high not in metrics
    assert metrics["prompt_tokens"] > 0 and metrics["completion_tokens"] > 0
    assert metrics["n_tasks"] == 2
    assert not math.isnan(metrics["scored_rate"])


@pytest.mark.slow
def test_tiny_sweep_writes_the_report_from_mlflow(tiny_sweep):
    """Both conditions of one embedded model through the real sweep runner, MLflow store and report."""
    outcome, report = tiny_sweep
    assert outcome.count("failed") == 0, [c.error for c in outcome.cells]
    for name in REPORT_FILES:
        assert (report / name).is_file(), name
    assert (report / "score_records.jsonl").is_file()
    assert any("ICIR" in title for title in outcome.tables)
    QUALITY = ("craft", "structure_coherence", "originality", "genre_effectiveness", "characterization")
    # In MLflow's own records: one trace per conversation, a span per turn, the judge's scores on it.
    for cell in outcome.cells:
        run = tracking.client().get_run(cell.run_id)
        traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=cell.run_id, return_type="list")
        assert len(traces) == 2, cell.cell.condition
        rows = tracking.load_table(cell.run_id, "conversations.json")
        for trace in traces:
            story = trace.info.tags["narrative_eval.trace_key"].split("/")[0]
            turns = rows[rows["story_id"] == story]
            assert set(turns["trace_id"]) == {trace.info.trace_id}
            assert len(trace.data.spans) == 1 + len(turns)
            judged = {a.name: a for a in trace.info.assessments}
            assert {f"smollm2-judge/{d}" for d in QUALITY} <= set(judged), judged
            for d in QUALITY:  # a score, or the reason there is none
                feedback = judged[f"smollm2-judge/{d}"].feedback
                assert feedback.value is not None or feedback.error.error_message
        versions = run.data.tags["narrative_eval.prompt_versions"]
        assert run.inputs.dataset_inputs and "default" in versions
        # The rubrics its judge ran (checklist and quality), linked as the single-turn studies link theirs.
        assert "rubric.creative_checklist/" in versions and "rubric.creative_quality/" in versions, versions


def test_scoreable_rules(runtime, smollm2_spec):
    cell = make_cell(smollm2_spec, "full", GenerationParams(temperature=0.0, max_new_tokens=2), limit=1)
    result = IncrementalDeliveryStudy().run_cell(cell, runtime)
    [kept] = [Conversation.from_logged(a, "story_id") for a in result.artifacts["trajectories.json"] if a["kept"]]
    assert kept.truncated and not kept.scoreable() and not kept.scoreable(score_truncated=True)


@pytest.mark.slow
def test_a_sweep_with_nothing_scored_keeps_its_cells_and_says_why(tmp_path, repo_root, capsys):
    """Every trajectory cut at the token limit and none scored (as when a judge's every reply fails to parse): the
    sweep finishes, its parent and cells FINISHED, and the report has its diagnostics and, in place of each paired
    table, why it is missing (missing_tables.json), which the report command prints too (exit 0)."""
    from experiments.report import main as report_main

    pytest.importorskip("llama_cpp")
    sweep = f"creative-unscored-{tmp_path.name}"
    outcome = creative_sweep(tmp_path, sweep, repo_root, """
        limit: 1
        generation: {temperature: 0.8, max_new_tokens: 3}
        judges: [{id: smollm2-judge, model: smollm2}]
        truncation: {regenerate: 0}
        """)
    assert outcome.count("failed") == 0 and outcome.count("finished") == 2, [c.error for c in outcome.cells]
    assert {tracking.client().get_run(c.run_id).info.status for c in outcome.cells} == {"FINISHED"}
    assert tracking.client().get_run(outcome.parent_run_id).info.status == "FINISHED"
    note = outcome.tables[MISSING_ENTRY]
    assert "no scored FULL or SHARDED story to compare (conditions scored: none)" in note and "failure_rate" in note
    report = tmp_path / "report"
    assert (report / "task_composition.csv").is_file()
    assert not (report / "model_ci.csv").exists()
    assert set(missing_tables(report)) == set(PAIRED_TABLES)
    capsys.readouterr()
    again = tmp_path / "again"
    assert report_main(["creative-integrity", "--sweep", sweep, "--out", str(again)]) == 0
    printed = capsys.readouterr().out
    assert f"## {MISSING_ENTRY}\n> Not written: no scored FULL or SHARDED story" in printed
    assert "incomplete report: 7 table(s) not written (model_ci, " in printed
