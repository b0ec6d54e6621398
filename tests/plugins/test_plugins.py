"""Extensions from outside the repo: a package installed as a plugin adds a metric, a rubric, a prompt setting,
a condition, a backend, an executor and a study through the `narrative_eval.plugins` entry point, touching no
file of the project.

The plugin is installed with pip into a temporary folder; everything that uses it runs in a subprocess with
that folder on PYTHONPATH, so the registries of this test process never see it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


def install(source: Path, target: Path) -> Path:
    """pip-install the plugin package at `source` into the folder `target` (never into the project's environment)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         str(source)],
        check=True, timeout=300,
    )
    return target


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    return install(HERE / "demo_plugin", tmp_path_factory.mktemp("site"))


def run_with_plugin(plugin_path: Path, tmp_path: Path, script: str) -> dict:
    """Run `script` in a fresh interpreter that has the plugin installed; it prints one JSON object last."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_path), env.get("PYTHONPATH", "")])
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env["NARRATIVE_EVAL_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    env["NARRATIVE_EVAL_CACHE"] = str(tmp_path / "requests.sqlite")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          timeout=1200, cwd=HERE.parents[1])
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def sweep_command(plugin_path: Path, tmp_path: Path, *argv: str) -> dict:
    """`python -m experiments.sweep ARGV` with the plugin installed: its exit code and what it printed."""
    return run_with_plugin(plugin_path, tmp_path, f"""
        import contextlib, io, json
        from experiments.sweep import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main({list(argv)!r})
        print(json.dumps({{"code": code, "text": out.getvalue()}}))
    """)


def test_registries_list_the_plugin_with_its_origin(plugin_path, tmp_path):
    found = run_with_plugin(plugin_path, tmp_path, """
        import json
        from experiments.sweep import all_registries
        print(json.dumps({kind: {e.name: e.origin for e in registry.entries()} for kind, registry in all_registries().items()}))
    """)
    plugin = "plugin narrative-eval-demo-plugin"
    assert found["metric"]["length_ratio"].startswith(plugin)
    assert found["rubric"]["three_dims"].startswith(plugin)
    assert found["prompt setting"]["terse"].startswith(plugin)
    assert found["condition"]["reverse"].startswith(plugin)
    assert found["backend"]["llama_cpp_plugin"].startswith(plugin)
    assert found["executor"]["last_first"].startswith(plugin)
    assert found["study"]["line_count"].startswith(plugin)
    # The project's own entries name the module or file they come from.
    assert found["metric"]["chrf"] == "narrative_eval.metrics.chrf"
    assert found["rubric"]["infilling_narrative"].endswith("infilling_narrative.yaml")
    assert found["prompt setting"]["L2"].endswith("settings.yaml") and not found["prompt setting"]["L2"].startswith(plugin)
    listed = sweep_command(plugin_path, tmp_path, "--list")
    assert listed["code"] == 0
    assert "length_ratio  [plugin narrative-eval-demo-plugin: narrative_eval_demo_plugin]" in listed["text"]
    assert "incremental-delivery (also: incremental, creative, creative-integrity)" in listed["text"]


def test_plugin_study_is_listed_and_a_config_naming_it_validates(plugin_path, tmp_path, repo_root):
    import yaml

    listed = sweep_command(plugin_path, tmp_path, "--list")
    assert listed["code"] == 0
    assert "line_count (also: lines)  [plugin narrative-eval-demo-plugin: narrative_eval_demo_plugin]" in listed["text"]
    config = tmp_path / "lines.yaml"
    config.write_text(yaml.safe_dump({"study": "lines", "sweep": "plugin-lines", "models": ["smollm2", "gemma3"],
                                      "data": str(repo_root / "data/infilling/sample.jsonl")}))
    dry = sweep_command(plugin_path, tmp_path, "--config", str(config), "--dry-run")
    assert dry["code"] == 0 and "2 cells" in dry["text"], dry["text"]
    found = run_with_plugin(plugin_path, tmp_path, f"""
        import json
        from narrative_eval.config import load_config
        from narrative_eval.study import experiment_of

        study = load_config({str(config)!r}, catalog={str(repo_root / 'experiments/configs/models.yaml')!r}).study
        print(json.dumps({{"study": study, "experiment": experiment_of(study)}}))
    """)
    assert found == {"study": "line_count", "experiment": "plugin-line-count"}  # the alias is stored canonical


def test_plugin_metric_rubric_and_setting_in_a_sweep_and_its_report(plugin_path, tmp_path, repo_root):
    config = tmp_path / "plugin.yaml"
    config.write_text(textwrap.dedent(f"""
        study: infilling
        sweep: plugin-demo
        data: {repo_root / 'data/infilling/sample.jsonl'}
        limit: 2
        models: [smollm2]
        prompt_settings: [L2, terse]
        metrics: [bertscore, rouge1, meteor, chrf, semf1, length_ratio, length_balance]
        generation: {{temperature: 0.3, max_new_tokens: 48}}
        judges:
          - {{id: demo-judge, model: smollm2, rubric: three_dims, max_new_tokens: 96}}
        executor: last_first
        judge_checks: false
        report_dir: {tmp_path / 'report'}
    """))
    # No control items: what they check does not depend on a plugin (tests/test_sweep_judge_checks.py).
    found = run_with_plugin(plugin_path, tmp_path, f"""
        import json
        from narrative_eval import tracking
        from narrative_eval.config import load_config
        from narrative_eval.sweep import run_sweep
        from ui.runs import MEAN, metric_columns

        outcome = run_sweep(load_config({str(config)!r}, catalog={str(repo_root / 'experiments/configs/models.yaml')!r}))
        runs = tracking.sweep_cell_runs("infilling", "plugin-demo")
        order = list(runs.sort_values("start_time")["params.prompt_setting"])
        rows = {{r["params.prompt_setting"]: tracking.load_table(r["run_id"], "generations.json").to_dict("records") for _, r in runs.iterrows()}}
        metrics = {{r["params.prompt_setting"]: {{k[8:]: v for k, v in r.items() if k.startswith("metrics.")}} for _, r in runs.iterrows()}}
        columns = [metric for _, metric in metric_columns(runs, MEAN, "demo-judge", study="infilling")]
        print(json.dumps({{"statuses": [c.status for c in outcome.cells], "metrics": metrics, "rows": rows, "order": order,
                          "columns": columns}}, default=str))
    """)
    assert found["statuses"] == ["finished", "finished"]
    assert set(found["metrics"]) == {"L2", "terse"}  # the plugin's prompt setting ran as a cell
    assert found["order"] == ["terse", "L2"]  # the plugin's executor ran the grid last cell first
    for setting, rows in found["rows"].items():
        # The signed plugin metric is logged as computed, negative where the answer is the shorter (never clipped).
        balances = [row["length_balance"] for row in rows]
        words = [(len(row["answer"].split()), len(row["gold"].split())) for row in rows]
        assert balances == [pytest.approx((a - g) / (a + g)) for a, g in words], setting
        assert found["metrics"][setting]["length_balance"] == pytest.approx(sum(balances) / len(balances))
    assert any(row["length_balance"] < 0 for rows in found["rows"].values() for row in rows)
    for setting, metrics in found["metrics"].items():
        # The plugin metric (named: it is no study's default) is computed, logged, and averaged into AtAvg with the
        # five built-in ones.
        names = ("bertscore", "rouge1", "meteor", "chrf", "semf1", "length_ratio")
        assert "length_ratio" in metrics, setting
        assert metrics["at_avg"] == pytest.approx(sum(metrics[n] for n in names) / 6, abs=1e-9), setting
        # QAvg is the mean over the rubric's three dimensions, per judged row.
        judged = [r for r in found["rows"][setting] if r.get("judge/demo-judge/status") == "ok"]
        for row in judged:
            dims = [row[f"judge/demo-judge/{d}"] for d in ("fluency", "coherence", "relevance")]
            assert row["judge/demo-judge/qavg"] == pytest.approx(sum(dims) / 3)
            assert "judge/demo-judge/faithfulness" not in row
        if judged:
            assert "judge/demo-judge/qavg" in metrics
    assert any("length_ratio" in column for column in found["columns"])
    main = pd.read_csv(tmp_path / "report" / "main.csv")
    assert "length_ratio" in main.columns
    assert set(main["setting"]) == {"L2", "terse"}


def test_plugin_condition_drives_a_conversation(plugin_path, tmp_path, repo_root):
    found = run_with_plugin(plugin_path, tmp_path, f"""
        import json
        from narrative_eval.backends import CachedBackend, get_backend
        from narrative_eval.config import load_config
        from narrative_eval.studies.incremental.tasks import load_tasks
        from narrative_eval.evaluation import Item
        from narrative_eval.multi_turn import deliver
        from narrative_eval.records import GenerationParams
        from narrative_eval.studies.incremental.turns import conversation_turns
        from narrative_eval.sweep import describe_grid

        task = load_tasks({str(repo_root / 'data/creative/tasks.json')!r})[0]
        config = load_config({str(repo_root / 'experiments/configs/incremental_embedded.yaml')!r},
                             ["conditions=[sharded,reverse]", "limit=2"])
        generator = CachedBackend(get_backend(config.models[0]), None)
        [trajectory] = deliver(generator, [Item(task.story_id, {{}}, {{}})], [conversation_turns(task, "reverse")],
                               "reverse", "", GenerationParams(max_new_tokens=8), seed=0, continue_after_length=True)
        print(json.dumps({{"users": [turn.user for turn in trajectory.turns], "shards": list(task.shards),
                          "cells": describe_grid(config)["cells"]}}))
    """)
    assert found["users"] == found["shards"][::-1]
    assert [cell[2] for cell in found["cells"]] == ["sharded", "reverse"] * 2


def test_a_declared_plugin_study_runs_with_traces_and_control_checks(plugin_path, tmp_path, repo_root):
    """The plugin's `opening` study (36 lines of Python, its own prompt file and rubric) through the sweep command
    on the embedded model: the library's loop gives it its rows, traces, report and judge control checks."""
    config = tmp_path / "opening.yaml"
    config.write_text(textwrap.dedent(f"""
        study: opening
        sweep: plugin-opening
        data: {repo_root / 'data/infilling/sample.jsonl'}
        limit: 2
        models: [smollm2]
        prompt_settings: [first]
        metrics: [chrf]
        generation: {{temperature: 0.3, max_new_tokens: 24}}
        judges: [{{id: smollm2-judge, model: smollm2, max_new_tokens: 64}}]
        judge_checks: {{items: 1}}
        report_dir: {tmp_path / 'report'}
    """))
    # The dry run counts the controls of one item: its true opening and its four controls (mismatched, blank, refused
    # and padded), judged once.
    planned = sweep_command(plugin_path, tmp_path, "--config", str(config), "--dry-run")
    assert planned["code"] == 0 and "5 on control items" in planned["text"], planned["text"]
    swept = sweep_command(plugin_path, tmp_path, "--config", str(config), "--no-progress")
    assert swept["code"] == 0, swept["text"]
    found = run_with_plugin(plugin_path, tmp_path, """
        import json, mlflow
        from narrative_eval import tracking

        [run] = tracking.sweep_cell_runs("plugin-opening", "plugin-opening").to_dict("records")
        rows = tracking.load_table(run["run_id"], "generations.json").to_dict("records")
        traces = mlflow.search_traces(locations=[run["experiment_id"]], run_id=run["run_id"], return_type="list")
        names = sorted({a.name for trace in traces for a in trace.info.assessments})
        print(json.dumps({"rows": rows, "traces": len(traces), "assessments": names,
                          "metrics": {k[8:]: v for k, v in run.items() if k.startswith("metrics.")}}, default=str))
    """)
    assert len(found["rows"]) == 2 and found["traces"] == 2
    assert {"item_id", "rest", "seed", "answer", "first_sentence", "judge/smollm2-judge/qavg"} <= set(found["rows"][0])
    assert {"first_sentence", "chrf", "smollm2-judge/fit"} <= set(found["assessments"])
    assert found["metrics"]["n_items"] == 2 and "judge/smollm2-judge/failure_rate" in found["metrics"]
    checks = pd.read_csv(tmp_path / "report" / "judge_checks.csv")
    assert set(checks["check"]) == {"mismatched_reference", "blank_answer", "refusal", "padded_output"}
    assert set(checks["rubric"]) == {"opening_quality"}
    assert sorted(path.name for path in (tmp_path / "report").glob("*.csv")) == [
        "cost.csv", "judge_card.csv", "judge_checks.csv", "main.csv", "openings.csv"]


def test_a_plugin_study_version_bump_reruns_its_cells_and_a_rerun_without_one_skips_them(plugin_path, tmp_path,
                                                                                       tmp_path_factory, repo_root):
    """The plugin's study and its installed distribution's version are part of each cell's spec hash: the same
    sweep run again skips its finished cell; the plugin installed again with the study's version raised runs it anew
    (the first version's run stays as it was)."""
    import yaml

    source = tmp_path_factory.mktemp("bumped") / "demo_plugin"
    shutil.copytree(HERE / "demo_plugin", source)
    code = source / "narrative_eval_demo_plugin" / "__init__.py"
    code.write_text(code.read_text().replace("    version = 1  #", "    version = 2  #"))
    bumped_path = install(source, tmp_path_factory.mktemp("site-bumped"))
    config = tmp_path / "lines.yaml"
    # One built-in metric: the plugin's own metrics would put their distribution in the versions too.
    config.write_text(yaml.safe_dump({"study": "line_count", "sweep": "plugin-versions", "models": ["smollm2"],
                                      "data": str(repo_root / "data/infilling/sample.jsonl"), "metrics": ["chrf"],
                                      "judge_checks": False, "report_dir": str(tmp_path / "report")}))
    script = f"""
        import json
        from narrative_eval.config import load_config
        from narrative_eval.sweep import run_sweep

        [cell] = run_sweep(load_config({str(config)!r}, catalog={str(repo_root / 'experiments/configs/models.yaml')!r})).cells
        print(json.dumps({{"status": cell.status, "hash": cell.cell.spec_hash, "versions": cell.cell.versions}}))
    """
    first, again = run_with_plugin(plugin_path, tmp_path, script), run_with_plugin(plugin_path, tmp_path, script)
    bumped, bumped_again = run_with_plugin(bumped_path, tmp_path, script), run_with_plugin(bumped_path, tmp_path, script)
    assert first["versions"] == {"study": "narrative-eval-demo-plugin 0.1.0"}
    assert (first["status"], again["status"]) == ("finished", "skipped") and again["hash"] == first["hash"]
    assert bumped["versions"] == {"study": "version 2, narrative-eval-demo-plugin 0.1.0"}
    assert bumped["status"] == "finished" and bumped["hash"] != first["hash"]
    assert bumped_again["status"] == "skipped"


def test_a_declared_multi_turn_plugin_study_gets_traces_and_a_report_it_wrote_no_code_for(plugin_path, tmp_path,
                                                                                          repo_root):
    """The plugin's `revision` study (its own data file, two conditions, its own checklist and quality rubrics; no
    code for records, controls or reports) through the sweep command on the embedded model: one trace per
    conversation, a span per turn, each judge verdict as assessments (per requirement for the checklist), the
    default report and the judge's control checks."""
    config = tmp_path / "revision.yaml"
    # One brief (three requirements, two revision notes) under both conditions; SmolLM2 is cut at 24 tokens, so its
    # cut replies are scored, flagged, rather than regenerated.
    config.write_text(json.dumps({
        "study": "revision", "sweep": "plugin-revision", "limit": 1, "models": ["smollm2"],
        "data": str(HERE / "demo_plugin" / "narrative_eval_demo_plugin" / "revision_briefs.jsonl"),
        "conditions": ["plain", "recap"], "generation": {"temperature": 0.3, "max_new_tokens": 24},
        "truncation": {"regenerate": 0, "score": True}, "judge_checks": {"items": 1},
        "judges": [{"id": "smollm2-judge", "model": "smollm2", "max_new_tokens": 256}],
        "report_dir": str(tmp_path / "report")}))
    # Before any reply exists the dry run counts the controls on one item: the checklist's refusal (held near 0
    # adherence, no reply beside it) and the quality rubric's shuffled, refused and padded reply and the reply itself.
    planned = sweep_command(plugin_path, tmp_path, "--config", str(config), "--dry-run")
    assert planned["code"] == 0 and "5 on control items" in planned["text"], planned["text"]
    swept = sweep_command(plugin_path, tmp_path, "--config", str(config), "--no-progress")
    assert swept["code"] == 0, swept["text"]
    found = run_with_plugin(plugin_path, tmp_path, """
        import json, mlflow
        from narrative_eval import tracking

        runs = tracking.sweep_cell_runs("revision", "plugin-revision").to_dict("records")
        traces = {}
        for run in runs:
            for trace in mlflow.search_traces(locations=[run["experiment_id"]], run_id=run["run_id"], return_type="list"):
                traces.setdefault(run["params.condition"], []).append({
                    "spans": [span.name for span in trace.data.spans],
                    "assessments": {a.name: a.value for a in trace.info.assessments}})
        print(json.dumps({"traces": traces, "metrics": {run["params.condition"]: {k[8:]: v for k, v in run.items()
                                                                                   if k.startswith("metrics.")}
                                                            for run in runs}}, default=str))
    """)
    assert sorted(found["traces"]) == ["plain", "recap"]
    for condition, traces in found["traces"].items():
        [trace] = traces  # one conversation (limit 1, one seed) per cell
        assert trace["spans"] == ["conversation", "turn 1", "turn 2", "turn 3"], condition
        judged = found["metrics"][condition]["judge/smollm2-judge/failure_rate"] == 0
        names = set(trace["assessments"])
        if judged:  # every requirement of the brief (ids r1..r3), their mean, and the quality dimension
            assert names == {*(f"smollm2-judge/checklist/r{k}" for k in (1, 2, 3)), "smollm2-judge/adherence",
                             "smollm2-judge/vividness"}, names
        else:  # no valid verdict: the quality dimension with the reason
            assert names == {"smollm2-judge/vividness"} and trace["assessments"]["smollm2-judge/vividness"] is None
        assert "truncated_rate" in found["metrics"][condition]
    main = pd.read_csv(tmp_path / "report" / "main.csv")
    assert sorted(main["condition"]) == ["plain", "recap"] and "truncated_rate" in main
    contrasts = pd.read_csv(tmp_path / "report" / "contrasts.csv")
    assert set(contrasts["reference"]) == {"plain"} and set(contrasts["other"]) == {"recap"}
    assert set(contrasts["dimension"]) == {"adherence", "vividness"}
    # Its judge was checked on control items it declared nothing for: those its rubrics' kinds call for, built on
    # the sweep's own replies (the checklist's refusal; the quality rubric's shuffled, refused and padded reply).
    checks = pd.read_csv(tmp_path / "report" / "judge_checks.csv")
    assert set(zip(checks["rubric"], checks["check"])) >= {
        ("revision_checklist", "refusal"), ("revision_quality", "refusal"), ("revision_quality", "padded_output")}, checks
