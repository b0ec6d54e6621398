"""Judge control checks in whole sweeps: the embedded SmolLM2 writes, judges whose answers to control items are
known by construction (tests/control_judges.py) judge, through the real sweep runner, request cache and MLflow
store; then judge_checks.csv, the parent run's metrics, the verdict tags on the parent and cell runs, the
report's notes and the terminal summary; and the dry run's counts and prices of the control calls."""

from __future__ import annotations

import json
import statistics
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import yaml

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.errors import UserError
from narrative_eval.reports.judge_checks import JUDGE_CHECKS_TITLE, judge_note
from narrative_eval.judges.checks import PADDED
from narrative_eval.stats.judge_checks import COLUMNS, JUDGMENTS_ARTIFACT
from narrative_eval.studies.incremental.controls import refusal_text
from narrative_eval.sweep import PROMPT_TOKENS_ESTIMATE, describe_grid, run_sweep

from tests.control_judges import control_judge, shipped_instances

# Two judges that each give every fill one score make the report's judge-agreement correlation undefined.
pytestmark = pytest.mark.filterwarnings("ignore:An input array is constant")

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "experiments/configs/models.yaml"
SAMPLE = REPO / "data/infilling/sample.jsonl"
ORACLE, TOP, ALWAYS_A = "oracle", "always-top", "always-a"
INFILLING_CHECKS = ["mismatched_fill", "degenerate_fill"]


def judge_entry(judge_id: str, kind: str, good=(), **options) -> dict:
    """A config's judge entry for a control judge (its model spec written out, as for any judge not in the catalog)."""
    _, spec = control_judge(kind, good, refusal_text(), **options)
    return {**spec.model_dump(mode="json"), "id": judge_id}


def write_config(folder: Path, name: str, **keys) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"sweep": f"{name}-{folder.name}", "models": ["smollm2"], "seeds": [0],
                                    "cache": str(folder / "requests.sqlite"), "report_dir": str(folder / "report"),
                                    **keys}, sort_keys=False))
    return path


def cached_requests(folder: Path) -> int:
    with sqlite3.connect(folder / "requests.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]


def tags_of(run_id: str) -> dict[str, str]:
    return {k: v for k, v in tracking.client().get_run(run_id).data.tags.items() if k.startswith("judge_check/")}


@pytest.fixture(scope="module")
def infilling_sweep(tmp_path_factory):
    """Four shipped instances filled by SmolLM2, judged by the oracle (gold 5, anything else 1) and by a judge that
    rates everything 5; four instances per judge become controls."""
    folder = tmp_path_factory.mktemp("checked-infilling")
    good = [(i.problem, i.gold_answer) for i in shipped_instances()]
    path = write_config(folder, "checked", study="infilling", data=str(SAMPLE), limit=4, prompt_settings=["L2"],
                        generation={"temperature": 0.0, "max_new_tokens": 24}, metrics={"names": ["rouge1"]},
                        judges=[judge_entry(ORACLE, "control-oracle", good),
                                judge_entry(TOP, "control-constant", decision="good")],
                        judge_checks={"items": 4})
    config = load_config(path, catalog=CATALOG)
    return path, folder, run_sweep(config)


@pytest.mark.slow
def test_the_right_judge_passes_every_check_and_the_same_score_judge_fails_discrimination(infilling_sweep):
    _, folder, outcome = infilling_sweep
    assert outcome.count("finished") == 1, [c.error for c in outcome.cells]
    table = pd.read_csv(outcome.report_dir / "judge_checks.csv")
    assert tuple(table.columns) == COLUMNS
    rows = {(row["judge"], row["check"]): row for row in table.to_dict("records")}
    assert set(rows) == {(judge, check) for judge in (ORACLE, TOP) for check in [*INFILLING_CHECKS, PADDED]}
    # Length bias: the oracle scores the padded gold at the bottom, the same-score judge ties it; neither lets
    # padding win.
    right, same = rows[(ORACLE, PADDED)], rows[(TOP, PADDED)]
    assert (right["statistic"], right["value"], same["value"]) == ("length_bias", 0.0, 0.5)
    assert right["pass"] and same["pass"] and right["gap"] == -4.0 and same["gap"] == 0.0
    for check in INFILLING_CHECKS:
        right, same = rows[(ORACLE, check)], rows[(TOP, check)]
        assert right["n"] == same["n"] == 4 and right["n_failed"] == same["n_failed"] == 0
        assert right["value"] == 1.0 and right["gap"] == 4.0 and right["pass"]
        assert same["value"] == 0.5 and same["gap"] == 0.0 and not same["pass"] and "below 0.8" in same["note"]
    # Controls are judged once per sweep, apart from the cell: its judge only saw its four fills.
    [cell] = outcome.cells
    metrics = tracking.client().get_run(cell.run_id).data.metrics
    assert metrics[f"judge/{TOP}/n_judged"] == 4 and metrics[f"judge/{TOP}/qavg"] == 5.0
    judged = tracking.load_json_artifact(outcome.parent_run_id, JUDGMENTS_ARTIFACT)
    assert len(judged) == 2 * 3 * 4 and {j["judge"] for j in judged} == {ORACLE, TOP}


@pytest.mark.slow
def test_the_verdicts_land_on_the_parent_run_and_every_cell(infilling_sweep):
    _, _, outcome = infilling_sweep
    parent = tracking.client().get_run(outcome.parent_run_id).data.metrics
    assert parent[f"judge_check/{ORACLE}/mismatched_fill"] == 1.0 and parent[f"judge_check/{ORACLE}/mismatched_fill_pass"] == 1
    assert parent[f"judge_check/{TOP}/degenerate_fill"] == 0.5 and parent[f"judge_check/{TOP}/degenerate_fill_pass"] == 0
    assert parent[f"judge_check/{TOP}/degenerate_fill_lo"] < 0.5 < parent[f"judge_check/{TOP}/degenerate_fill_hi"]
    expected = {f"judge_check/{ORACLE}": "pass", f"judge_check/{TOP}": "fail: mismatched_fill, degenerate_fill"}
    for run_id in [outcome.parent_run_id, *(cell.run_id for cell in outcome.cells)]:
        assert tags_of(run_id) == expected


@pytest.mark.slow
def test_the_report_marks_the_failing_judges_tables(infilling_sweep):
    _, _, outcome = infilling_sweep
    note = judge_note(TOP, INFILLING_CHECKS)
    high = next(title for title in outcome.tables if title.startswith("High-quality fills") and TOP in title)
    for title in ("Main results (model x setting)", f"QAvg per model x prompt setting [{TOP}]", high):
        assert outcome.tables[title].endswith(note), title
    assert note not in outcome.tables["AtAvg per model x prompt setting"]
    assert not any(judge_note(ORACLE, []).split(" failed")[0] in md for md in outcome.tables.values())
    # The files carry the notes too, and the index names the failing judge's tables.
    assert (outcome.report_dir / "main.md").read_text().strip().endswith(note)
    assert (outcome.report_dir / f"high_quality_{TOP}.md").read_text().strip().endswith(note)
    index = json.loads((outcome.report_dir / "tables.json").read_text())[JUDGE_CHECKS_TITLE]
    assert f"`{TOP}` failed mismatched_fill, degenerate_fill" in index and high in index and ORACLE not in index.split("\n\n")[-1]


@pytest.mark.slow
def test_a_rerun_asks_nothing_again_and_the_terminal_marks_the_failing_judge(infilling_sweep, capsys):
    from experiments.sweep import main

    path, folder, outcome = infilling_sweep
    before = cached_requests(folder)
    assert main(["--config", str(path), "--catalog", str(CATALOG), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert cached_requests(folder) == before  # cells skipped, controls answered from the request cache
    assert f"  {ORACLE}: passed every check" in out and f"  {TOP}: FAILED" in out
    assert f"    {TOP} infilling_narrative/mismatched_fill: discrimination 0.500 (below 0.8; interval reaches 0.5)" in out
    assert tags_of(outcome.parent_run_id)[f"judge_check/{TOP}"] == "fail: mismatched_fill, degenerate_fill"


def judge_flags(run_id: str) -> dict[str, list[tuple[str, str]]]:
    """Judge -> (metadata flag, rationale) of each of its assessments on the run's traces (named `<judge>/...`)."""
    import mlflow

    from narrative_eval.tracing import JUDGE_CHECK_METADATA

    run = tracking.client().get_run(run_id)
    flags: dict[str, list[tuple[str, str]]] = {}
    for trace in mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list",
                                      include_spans=False):
        for assessment in trace.info.assessments:
            if assessment.source.source_type == "LLM_JUDGE":
                flags.setdefault(assessment.name.split("/")[0], []).append(
                    ((assessment.metadata or {}).get(JUDGE_CHECK_METADATA, ""), assessment.rationale or ""))
    return flags


@pytest.mark.slow
def test_the_failing_judge_is_flagged_where_its_scores_are_written(infilling_sweep):
    """MLflow listed "always-top QAvg 5.000" in the cell's description and on its traces with no word of the failed
    checks: the description now carries the warning after its headline, and each of that judge's assessments on the
    cell's traces carries it in its metadata and after its rationale; the judge that passed is not flagged."""
    from narrative_eval.stats.judge_checks import failed_checks_warning
    from narrative_eval.tracing import DESCRIPTION_TAG

    _, _, outcome = infilling_sweep
    warning = failed_checks_warning(TOP, INFILLING_CHECKS)
    [cell] = outcome.cells
    description = tracking.client().get_run(cell.run_id).data.tags[DESCRIPTION_TAG]
    assert f"{TOP} QAvg 5.000" in description and description.endswith(f"**{warning}**"), description
    assert f"judge {ORACLE} failed" not in description
    flags = judge_flags(cell.run_id)
    assert len(flags[TOP]) == len(flags[ORACLE]) >= 4 * 5  # four fills, five dimensions each (and their mean)
    assert all(flag == warning and why.endswith(warning) for flag, why in flags[TOP])
    assert flags[ORACLE] and not any(flag or warning in why for flag, why in flags[ORACLE])


# Two short writing tasks of five shards (the fewest a task has), so that one task's story is another's wrong story.
TASKS = [
    {"domain": "mystery", "item_id": 1, "title": "The Key", "shards": [
        "Write a very short mystery story.", "A girl finds a key.", "The key was under the floor.",
        "Tell it in the past tense.", "Keep it very short."],
     "full_instruction": "Write a very short mystery story in which a girl finds a key under the floor. Tell it in "
                         "the past tense."},
    {"domain": "comedy", "item_id": 1, "title": "The Parrot", "shards": [
        "Write a very short funny story.", "The hero is a parrot.", "The parrot runs a bakery.", "End with a pun.",
        "Keep it very short."],
     "full_instruction": "Write a very short funny story about a parrot who runs a bakery. End with a pun."},
]
CHECKLISTS = [
    {"story_id": "mystery_001", "domain": "mystery", "item_id": 1, "title": "The Key", "constraints": [
        {"constraint_id": "c1", "type": "premise", "requirement": "A girl finds a key under the floor.",
         "introduced_at_shard": 2}]},
    {"story_id": "comedy_001", "domain": "comedy", "item_id": 1, "title": "The Parrot", "constraints": [
        {"constraint_id": "c1", "type": "premise", "requirement": "A parrot runs a bakery.", "introduced_at_shard": 2}]},
]


@pytest.fixture(scope="module")
def incremental_sweep(tmp_path_factory):
    """Two tasks FULL and SHARDED by SmolLM2, judged by a judge that prefers whatever is shown first."""
    folder = tmp_path_factory.mktemp("checked-incremental")
    (folder / "tasks.json").write_text(json.dumps(TASKS))
    (folder / "constraints.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHECKLISTS))
    path = write_config(folder, "checked", study="incremental-delivery", data=str(folder / "tasks.json"),
                        constraints=str(folder / "constraints.jsonl"), prompt_settings=["default"],
                        conditions=["full", "sharded"], generation={"temperature": 0.8, "max_new_tokens": 32},
                        judges=[judge_entry(ALWAYS_A, "control-always-a")], pairwise_judges=["pairwise"],
                        truncation={"regenerate": 0, "score": True})
    return load_config(path, catalog=CATALOG), run_sweep(load_config(path, catalog=CATALOG))


@pytest.mark.slow
def test_a_judge_that_always_prefers_a_fails_position_bias_and_its_pairs(incremental_sweep):
    config, outcome = incremental_sweep
    assert outcome.count("failed") == 0, [c.error for c in outcome.cells]
    rows = {(row.rubric, row.check): row for row in outcome.judge_checks}
    bias, identical, refused = (rows[("pairwise", check)] for check in ("position_bias", "identical_pair", "refusal_pair"))
    assert bias.value == 1.0 and not bias.passed and "prefers A" in bias.note
    assert identical.value == 0.0 and not identical.passed  # two identical stories, never a tie
    assert refused.value == 0.5 and not refused.passed  # the story wins as A and loses as B
    # Its single-item verdicts are the oracle's knowing no story: everything at the bottom, a refusal included.
    assert rows[("creative_checklist", "refusal")].passed and rows[("creative_checklist", "refusal")].value == 0.0
    assert rows[("creative_checklist", "other_task_story")].n == 2
    tag = tags_of(outcome.parent_run_id)[f"judge_check/{ALWAYS_A}"]
    assert tag.startswith("fail: ") and {"identical_pair", "refusal_pair", "position_bias"} <= set(tag[6:].split(", "))
    assert all(tags_of(cell.run_id) == {f"judge_check/{ALWAYS_A}": tag} for cell in outcome.cells)
    # The controls' stories are the FULL cell's final replies, each judged as written by the cell already.
    judged = tracking.load_json_artifact(outcome.parent_run_id, JUDGMENTS_ARTIFACT)
    assert {j["instance_id"] for j in judged} == {"mystery_001", "comedy_001"}
    # Every score table is the judge's (a note under it); the judge-independent diagnostics are not.
    note = judge_note(ALWAYS_A, []).split(" failed")[0] + " failed checks: "  # the checks' names follow
    scored = [title for title in outcome.tables if title.startswith(("Creative Integrity", "Paired FULL", "Pairwise"))]
    assert scored and all(note in outcome.tables[title] for title in scored)
    assert note not in outcome.tables["Tasks, constraints, shards and evaluation scale per genre"]
    # Its scores on each conversation's trace (dimensions, checklist items) carry the warning too.
    for cell in outcome.cells:
        flags = judge_flags(cell.run_id)[ALWAYS_A]
        assert flags and all(flag.startswith(f"⚠ judge {ALWAYS_A} failed checks: ") for flag, _ in flags)


def test_the_dry_run_counts_and_prices_the_control_calls(tmp_path, capsys):
    from experiments.sweep import main

    quickstart = REPO / "experiments/configs/quickstart.yaml"
    assert main(["--config", str(quickstart), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 72 fills judged in the cells; ten instances' gold, another passage's gold, a repeated sentence and the padded
    # gold, once.
    assert "judge calls: 112 (1 judge(s); 40 on control items, 35.7% (judge_checks: 10 items per judge))" in out
    off = describe_grid(load_config(quickstart, ["judge_checks=false"]))
    assert (off["judge_calls"], off["control_calls"]) == (72, 0)

    # A priced judge: every control call at the judge's token limit.
    priced = {"id": "api-judge", "max_new_tokens": 200, "model": {
        "id": "api-judge", "backend": "openai", "weights": "gpt-x",
        "options": {"prices": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}}}}
    grid = describe_grid(load_config(write_config(tmp_path, "priced", study="infilling", data=str(SAMPLE), limit=6,
                                                  judges=[priced], judge_checks={"items": 5}), catalog=CATALOG))
    assert grid["control_calls"] == 20
    assert grid["control_cost"] == pytest.approx(20 * (PROMPT_TOKENS_ESTIMATE * 1.0 + 200 * 10.0) / 1e6)
    assert grid["estimated_run_cost_usd"] == pytest.approx(sum(grid["cell_costs"]) + grid["control_cost"])


def test_the_incremental_dry_run_counts_controls_from_its_tasks(tmp_path):
    (tmp_path / "tasks.json").write_text(json.dumps(TASKS))
    (tmp_path / "constraints.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHECKLISTS))
    keys = dict(study="incremental-delivery", data=str(tmp_path / "tasks.json"),
                constraints=str(tmp_path / "constraints.jsonl"), conditions=["full", "sharded"],
                judges=["smollm2-judge"], pairwise_judges=["pairwise", {"rubric": "pairwise_evidence", "max_new_tokens": 320}])
    grid = describe_grid(load_config(write_config(tmp_path, "counted", **keys), catalog=CATALOG))
    # Per task: a refusal, another task's story, a shuffled and a padded story alone; three pairs in two orders per
    # rubric.
    assert grid["control_calls"] == 2 * (4 + 6 + 6)
    one = describe_grid(load_config(write_config(tmp_path, "one", **keys, judge_checks={"items": 1}), catalog=CATALOG))
    assert one["control_calls"] == 4 + 6 + 6
    # A judge that judges twice: every control call and every pairwise call of the sweep counted twice.
    sampled = {**keys, "judges": [{"id": "j", "model": "smollm2", "temperature": 0.7}], "judge_checks": {"items": 1}}
    once = describe_grid(load_config(write_config(tmp_path, "once", **sampled), catalog=CATALOG))
    twice = describe_grid(load_config(write_config(tmp_path, "twice", **sampled, judge_repeats=2), catalog=CATALOG))
    assert twice["control_calls"] == 2 * once["control_calls"] == 2 * (4 + 6 + 6)
    assert twice["after_sweep_calls"] == 2 * once["after_sweep_calls"] == 2 * (2 * 2 * 2)


def test_the_config_section_is_checked(tmp_path):
    base = dict(study="infilling", data=str(SAMPLE), judges=["smollm2-judge"])
    assert load_config(write_config(tmp_path, "default", **base), catalog=CATALOG).judge_checks.items == 20
    assert not load_config(write_config(tmp_path, "off", **base, judge_checks=False), catalog=CATALOG).judge_checks.enabled
    with pytest.raises(UserError, match=r"bad.yaml:\d+: unknown key 'judge_checks.itmes' \(did you mean 'items'\?\)"):
        load_config(write_config(tmp_path, "bad", **base, judge_checks={"itmes": 5}), catalog=CATALOG)


@pytest.mark.slow
def test_a_judge_judging_every_fill_three_times_gets_its_noise_measured_and_a_report_card(tmp_path):
    """A judge that answers at random, judging each of four fills three times (`judge_repeats: 3`): each cell logs
    its self-agreement, the report sets its noise beside the gaps between settings, and its report card carries
    both, with a verdict that follows from its checks."""
    path = write_config(tmp_path, "repeated", study="infilling", data=str(SAMPLE), limit=4, prompt_settings=["L1", "L2"],
                        generation={"temperature": 0.0, "max_new_tokens": 24}, metrics={"names": ["rouge1"]},
                        judges=[judge_entry("random", "control-random")], judge_repeats=3, judge_checks={"items": 4})
    config = load_config(path, catalog=CATALOG)
    assert [judge.repeats for judge in config.judges] == [3]
    outcome = run_sweep(config)
    assert outcome.count("finished") == 2, [c.error for c in outcome.cells]
    runs = tracking.sweep_cell_runs("infilling", config.sweep)
    alphas = runs["metrics.judge/random/mean_self_alpha"].astype(float)
    assert alphas.notna().all() and (alphas.abs() < 1).all(), alphas
    noise = pd.read_csv(outcome.report_dir / "judge_noise.csv").set_index("judge")
    assert noise.loc["random", "repeats"] == 3 and noise.loc["random", "within_sd"] > 0
    assert noise.loc["random", "groups"] == 2 and noise.loc["random", "noise_gap"] > 0
    card = pd.read_csv(outcome.report_dir / "judge_card.csv", keep_default_na=False).set_index("judge")
    assert float(card.loc["random", "self_alpha"]) == pytest.approx(alphas.mean())
    assert float(card.loc["random", "noise_gap"]) == pytest.approx(noise.loc["random", "noise_gap"])
    verdict = card.loc["random", "verdict"]
    assert verdict.startswith("do not use its scores") == bool(card.loc["random", "failed_checks"]), verdict


@pytest.mark.slow
def test_a_jury_is_reported_and_checked_as_a_judge_with_no_call_of_its_own(tmp_path):
    """The oracle, the same-score judge and the random judge as one jury (their median): every fill's jury scores
    are its members' median, the cell logs the jury's numbers and traces its verdicts, and the jury is checked on
    its members' control verdicts and gets a report card; the dry run counts no call for it."""
    import mlflow

    good = [(i.problem, i.gold_answer) for i in shipped_instances()]
    keys = dict(study="infilling", data=str(SAMPLE), limit=4, prompt_settings=["L2"],
                generation={"temperature": 0.0, "max_new_tokens": 24}, metrics={"names": ["rouge1"]},
                judges=[judge_entry(ORACLE, "control-oracle", good), judge_entry(TOP, "control-constant", decision="good"),
                        judge_entry("random", "control-random")], judge_checks={"items": 4})
    members = [ORACLE, TOP, "random"]
    alone = load_config(write_config(tmp_path, "members", **keys), catalog=CATALOG)
    config = load_config(write_config(tmp_path, "jury", **keys,
                                      juries=[{"id": "panel", "judges": members, "aggregate": "median"}]), catalog=CATALOG)
    assert describe_grid(config)["judge_calls"] == describe_grid(alone)["judge_calls"]
    outcome = run_sweep(config)
    [cell] = outcome.cells
    assert cell.status == "finished", cell.error
    rows = tracking.load_table(cell.run_id, "generations.json").to_dict("records")
    dimensions = [key.split("/")[2] for key in rows[0] if key.startswith(f"judge/{ORACLE}/")
                  and key.split("/")[2] not in ("status", "raw", "error", "qavg")]
    assert dimensions and len(rows) == 4
    for row in rows:
        for dimension in dimensions:
            assert row[f"judge/panel/{dimension}"] == statistics.median(
                row[f"judge/{member}/{dimension}"] for member in members), (row, dimension)
    metrics = tracking.client().get_run(cell.run_id).data.metrics
    assert metrics["judge/panel/qavg"] == pytest.approx(statistics.fmean(row["judge/panel/qavg"] for row in rows))
    assert metrics["judge/panel/failure_rate"] == 0.0
    traces = mlflow.search_traces(locations=[tracking.client().get_run(cell.run_id).info.experiment_id],
                                  run_id=cell.run_id, return_type="list")
    sources = {a.source.source_id for trace in traces for a in trace.info.assessments if a.name.startswith("panel/")}
    assert sources == {f"panel (jury: median of {', '.join(members)})"}
    checks = pd.read_csv(outcome.report_dir / "judge_checks.csv")
    oracle = checks[checks["judge"] == ORACLE].set_index("check")
    jury = checks[checks["judge"] == "panel"].set_index("check")
    assert list(jury.index) == list(oracle.index) and (jury["n"] == oracle["n"]).all()
    card = pd.read_csv(outcome.report_dir / "judge_card.csv", keep_default_na=False)
    assert list(card["judge"]) == [*members, "panel"]


@pytest.mark.slow
def test_a_multi_turn_jury_combines_each_requirement_and_dimension_of_its_members(tmp_path):
    """A jury (mean) of a judge that scores every story at the bottom and one that scores it at the top, on the
    incremental study: each final story's checklist requirement is 0.5 and each quality dimension 3, in the cell's
    numbers and in the report's, and the jury is checked on its members' control verdicts."""
    (tmp_path / "tasks.json").write_text(json.dumps(TASKS))
    (tmp_path / "constraints.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHECKLISTS))
    path = write_config(tmp_path, "jury", study="incremental-delivery", data=str(tmp_path / "tasks.json"),
                        constraints=str(tmp_path / "constraints.jsonl"), prompt_settings=["default"],
                        conditions=["full", "sharded"], generation={"temperature": 0.8, "max_new_tokens": 32},
                        judges=[judge_entry("bottom", "control-oracle"), judge_entry(TOP, "control-constant", decision="good")],
                        juries=[{"id": "panel", "judges": ["bottom", TOP]}], truncation={"regenerate": 0, "score": True})
    outcome = run_sweep(load_config(path, catalog=CATALOG))
    assert outcome.count("finished") == 2, [c.error for c in outcome.cells]
    for cell in outcome.cells:
        metrics = tracking.client().get_run(cell.run_id).data.metrics
        assert metrics["judge/bottom/adherence"] == 0.0 and metrics[f"judge/{TOP}/adherence"] == 1.0
        assert metrics["judge/panel/adherence"] == 0.5 and metrics["judge/panel/failure_rate"] == 0.0
        quality = [key for key in metrics if key.startswith(f"judge/{TOP}/") and metrics[key] == 5.0]
        assert quality and all(metrics[key.replace(TOP, "panel")] == 3.0 for key in quality), quality
    judges = {row.judge for row in outcome.judge_checks}
    assert judges == {"bottom", TOP, "panel"}
    panel = {(row.rubric, row.check): row.n for row in outcome.judge_checks if row.judge == "panel"}
    assert panel == {(row.rubric, row.check): row.n for row in outcome.judge_checks if row.judge == "bottom"}
    scores = pd.read_csv(outcome.report_dir / "cell_scores.csv")
    assert set(scores["judge"]) >= {"bottom", TOP, "panel"}, scores


@pytest.mark.slow
def test_a_multi_turn_judge_that_repeats_gets_its_noise_table_and_its_pairwise_flip_rate(tmp_path):
    """The random judge judging every final story and every FULL/SHARDED pair twice (`judge_repeats: 2`) in the
    incremental study: each final row keeps each scorer's repeats, the report sets each scorer's noise beside the gaps
    between the model x setting x condition groups (judge_noise.csv), and the parent run logs the pairwise judge's
    flip rate per dimension, also in pairwise_flip_rates.csv."""
    (tmp_path / "tasks.json").write_text(json.dumps(TASKS))
    (tmp_path / "constraints.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHECKLISTS))
    path = write_config(tmp_path, "noisy", study="incremental-delivery", data=str(tmp_path / "tasks.json"),
                        constraints=str(tmp_path / "constraints.jsonl"), prompt_settings=["default"],
                        conditions=["full", "sharded"], generation={"temperature": 0.8, "max_new_tokens": 32},
                        judges=[judge_entry("random", "control-random")], judge_repeats=2, pairwise_judges=["pairwise"],
                        judge_checks={"items": 1}, truncation={"regenerate": 0, "score": True})
    outcome = run_sweep(load_config(path, catalog=CATALOG))
    assert outcome.count("finished") == 2, [c.error for c in outcome.cells]
    for cell in outcome.cells:
        finals = [row for row in tracking.load_table(cell.run_id, "conversations.json").to_dict("records") if row["final"]]
        kept = [row[f"judge/random/{scorer}_repeat_means"] for row in finals for scorer in ("checklist", "quality")]
        # A logged table keeps a list cell as its JSON text.
        assert finals and all(len(json.loads(v) if isinstance(v, str) else v) == 2 for v in kept), kept
    noise = pd.read_csv(outcome.report_dir / "judge_noise.csv").set_index("judge")
    assert list(noise.index) == ["random/checklist", "random/quality"]
    assert (noise["repeats"] == 2).all() and (noise["groups"] == 2).all() and noise.loc["random/quality", "within_sd"] > 0
    assert any(title.startswith("How much of a gap") for title in outcome.tables)
    metrics = tracking.client().get_run(outcome.parent_run_id).data.metrics
    flips = {key: value for key, value in metrics.items() if key.startswith("pairwise/random/pairwise/flip_rate_")}
    assert sorted(flips) == ["pairwise/random/pairwise/flip_rate_constraint_following",
                             "pairwise/random/pairwise/flip_rate_creative_quality"]
    assert all(0 <= value <= 1 for value in flips.values())
    table = pd.read_csv(outcome.report_dir / "pairwise_flip_rates.csv").set_index("dimension")
    assert table["flip_rate"].to_dict() == pytest.approx({key.rsplit("flip_rate_", 1)[1]: value
                                                          for key, value in flips.items()})
    assert (table["repeats"] == 2).all() and (table["n_judgments"] == 4).all()


@pytest.mark.slow
def test_a_weighted_jury_is_weighed_by_its_members_checks_and_combined_in_the_report(tmp_path):
    """The oracle and the judge that rates everything 5 as a weighted jury: the checks give the oracle every weight
    (discrimination 1) and the other none (it ties every control, 0.5: chance), logged on the parent run; no cell
    holds the jury, and the report's weighted_juries.csv is the oracle's scores."""
    good = [(i.problem, i.gold_answer) for i in shipped_instances()]
    keys = dict(study="infilling", data=str(SAMPLE), limit=4, prompt_settings=["L2"],
                generation={"temperature": 0.0, "max_new_tokens": 24}, metrics={"names": ["rouge1"]},
                judges=[judge_entry(ORACLE, "control-oracle", good), judge_entry(TOP, "control-constant", decision="good")],
                judge_checks={"items": 4})
    alone = load_config(write_config(tmp_path, "members", **keys), catalog=CATALOG)
    config = load_config(write_config(tmp_path, "weighted", **keys,
                                      juries=[{"id": "panel", "judges": [ORACLE, TOP], "aggregate": "weighted"}]),
                         catalog=CATALOG)
    assert describe_grid(config)["judge_calls"] == describe_grid(alone)["judge_calls"]
    outcome = run_sweep(config)
    [cell] = outcome.cells
    assert cell.status == "finished", cell.error
    assert not [key for key in tracking.client().get_run(cell.run_id).data.metrics if key.startswith("judge/panel/")]
    metrics = tracking.client().get_run(outcome.parent_run_id).data.metrics
    assert (metrics[f"jury/panel/weight/{ORACLE}"], metrics[f"jury/panel/weight/{TOP}"]) == (1.0, 0.0)
    rows = tracking.load_table(cell.run_id, "generations.json")
    table = pd.read_csv(outcome.report_dir / "weighted_juries.csv").set_index("dimension")
    assert table.loc["qavg", "score"] == pytest.approx(pd.to_numeric(rows[f"judge/{ORACLE}/qavg"]).mean())
    assert table.loc["qavg", "n"] == 4 and table.loc["qavg", "weights"] == f"{ORACLE} 1.000, {TOP} 0.000"
    assert any(title.startswith("Weighted juries") for title in outcome.tables)
    assert "panel" not in set(pd.read_csv(outcome.report_dir / "judge_checks.csv")["judge"])
