"""End-to-end: the Annotate tab rates a real incremental-delivery sweep's stories in headless Chromium (pointwise and
pairwise, blinded), exports them, and the exported files load with the human-validation loaders and feed its report."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import (BROWSER_PATIENCE_MS, HUMAN_FAST_MS, MACHINE_FAST_MS, VIEWPORT, choose, open_tab, pause, pick,
                             runs_match_report, settle)

from tests import shared_sweeps
from tests.servers import start_app, stop
from tests.waiting import wait_until

# One worker with tests/studies/test_incremental.py: the sweep below asks what its tiny sweep asked (tests/shared_sweeps.py).
pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow, pytest.mark.xdist_group(shared_sweeps.CREATIVE_GROUP)]

REPO = Path(__file__).resolve().parents[2]
SWEEP = "ui-stories"
JUDGE = "smollm2-judge"


@pytest.fixture(scope="module")
def stories_env(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A tracking store of its own: the shared app's store must keep holding no incremental-delivery sweep (its empty
    Conversations tab is tested). The request cache stays the session's."""
    root = tmp_path_factory.mktemp("stories")
    return root, {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
                  "NARRATIVE_EVAL_ARTIFACT_ROOT": str(root / "artifacts")}


@pytest.fixture(scope="module")
def stories_sweep(stories_env) -> Path:
    """One task, FULL and SHARDED, on the embedded SmolLM2 judged by itself; returns the sweep's report folder. Its
    requests are those of the first task of tests/studies/test_incremental.py's tiny sweep, which ran before it on
    this worker: the session's request cache answers them all."""
    root, env = stories_env
    command = [
        sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/incremental_embedded.yaml",
        "--set", f"sweep={SWEEP}", "--set", "models=[smollm2]", *shared_sweeps.set_arguments(shared_sweeps.CREATIVE),
        "--set", f"report_dir={root / 'reports'}/{{sweep}}", "--limit", "1", "--no-progress",
        # The judge's control items are not rated here (tests/test_sweep_judge_checks.py checks them).
        "--set", "judge_checks=false",
    ]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "reports" / SWEEP


@pytest.fixture(scope="module")
def stories_app(stories_sweep, stories_env):
    """The app on that store (its own ratings file and reports folder), in a subprocess."""
    root, env = stories_env
    process, url = start_app(["--reports-dir", str(root / "reports"), "--jobs-dir", str(root / "jobs"),
                              "--annotations", str(root / "annotations.sqlite")], root / "app.log", env)
    yield url
    stop(process)


def _finals(env: dict[str, str], tmp_path: Path) -> tuple[dict[str, str], set[str]]:
    """condition -> the final story of the sweep's one task, and the cell run ids, read straight from MLflow."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("incremental-delivery").experiment_id
    runs = client.search_runs([experiment], f"tags.`narrative_eval.sweep` = '{SWEEP}' and tags.`narrative_eval.kind` = 'cell'")
    finals = {}
    for run in runs:
        with open(client.download_artifacts(run.info.run_id, "conversations.json", str(tmp_path))) as handle:
            payload = json.load(handle)
        rows = [dict(zip(payload["columns"], row)) for row in payload["data"]]
        finals[run.data.params["condition"]] = next(row["reply"] for row in rows if row["final"])
    return finals, {run.info.run_id for run in runs}


def _words(text: str) -> str:
    return " ".join(text.split())


def _condition_of(text: str, finals: dict[str, str]) -> str:
    (condition,) = [c for c, story in finals.items() if _words(story) == _words(text)]
    return condition


def _rate_pair(page, rater: str, constraint: str, quality: str) -> tuple[str, str]:
    """Rate the pair shown to this rater; returns the condition shown as A and as B."""
    from playwright.sync_api import expect

    page.locator("#annotate-rater textarea, #annotate-rater input").first.fill(rater)
    page.locator("#stories-next").click()
    expect(page.locator("#stories-item .side-by-side .card")).to_have_count(2)
    shown = [page.locator(f"#stories-item .card[data-slot='{slot}'] .story").inner_text() for slot in "AB"]
    page.locator("#stories-constraint_following").get_by_text(constraint, exact=True).click()
    page.locator("#stories-creative_quality").get_by_text(quality, exact=True).click()
    page.locator("#stories-submit").click()
    expect(page.locator("#stories-message")).to_contain_text(f"Saved. {rater}")
    return tuple(shown)


def test_stories_are_rated_blind_exported_and_read_by_the_human_validation_report(
        stories_app, stories_sweep, stories_env, browser, screenshot, tmp_path):
    from narrative_eval.studies.incremental.tasks import load_tasks
    from narrative_eval.studies.incremental.human_records import load_pair_cases, load_pairwise_verdicts, load_pointwise_ratings
    from narrative_eval.studies.incremental.score_records import load_score_records
    from playwright.sync_api import expect

    root, env = stories_env
    finals, run_ids = _finals(env, tmp_path)
    assert set(finals) == {"full", "sharded"} and _words(finals["full"]) != _words(finals["sharded"])
    task = load_tasks(REPO / "data/creative/tasks.json")[0]
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(BROWSER_PATIENCE_MS)
    page.goto(stories_app)
    page.wait_for_selector("#tabs")
    settle(page)
    open_tab(page, "Annotate")
    page.locator("#annotate-rater textarea, #annotate-rater input").first.fill("ana")
    open_tab(page, "Stories (incremental delivery)")
    choose(page, "stories-sweep", SWEEP)

    # Pointwise: both final stories, one after the other (the next comes by itself); FULL gets 4s, SHARDED 2s.
    page.locator("#stories-next").click()
    item = page.locator("#stories-item")
    expect(item.locator(".brief")).to_contain_text(_words(task.full_instruction))
    expect(item.locator(".checklist li")).to_have_count(len(task.constraints))
    given = {"full": "4", "sharded": "2"}
    for rated in (1, 2):
        html = item.inner_html().lower()
        assert "smollm2" not in html and "sharded" not in html and not any(run_id in html for run_id in run_ids)
        condition = _condition_of(item.locator(".card .story").last.inner_text(), finals)
        for key in ("craft", "structure_coherence", "originality", "genre_effectiveness"):
            page.locator(f"#stories-{key}").get_by_text(given[condition], exact=True).click()
        page.locator("#stories-characterization").get_by_text("N/A", exact=True).click()
        if rated == 1:
            screenshot(page, "annotate-stories-pointwise")
        page.locator("#stories-submit").click()
        expect(page.locator("#stories-progress")).to_contain_text(f"{rated} of 2")
    expect(item).to_contain_text("No scored story left")

    # Pairwise: FULL and SHARDED as A and B in a random order, rated by two raters.
    page.locator("#stories-mode").get_by_text("pairwise", exact=True).click()
    shown = {"ana": _rate_pair(page, "ana", "A clearly better", "B slightly better")}
    screenshot(page, "annotate-stories-pairwise")
    shown["ben"] = _rate_pair(page, "ben", "Tie", "A slightly better")
    expect(page.locator("#stories-progress")).to_contain_text("1 of 1")
    page.get_by_text("Agreement of story ratings with the judge").click()
    page.get_by_role("button", name="Compute").click()
    expect(page.locator("#stories-few")).to_contain_text("too uncertain")

    page.get_by_text("Export for the human-validation report").click()
    expect(page.locator("#stories-export-judge input")).to_have_value(JUDGE)
    page.locator("#stories-export").click()
    expect(page.locator("#stories-export-message")).to_contain_text("Exported 2 pointwise ratings and 2 pairwise verdicts")
    screenshot(page, "annotate-stories-export")

    # The files load with the study's loaders, every id checked against the sweep's own score records.
    folder = stories_sweep / "human_ratings"
    record_ids = {r.record_id for r in load_score_records(stories_sweep / "score_records.jsonl")}
    full_id, sharded_id = (f"smollm2/{c}/{task.story_id}/seed0/{JUDGE}" for c in ("full", "sharded"))
    assert {full_id, sharded_id} <= record_ids
    ratings = {(r.record_id, r.rater): r.scores for r in load_pointwise_ratings(folder / "pointwise_ratings.jsonl", record_ids)}
    assert ratings == {(full_id, "ana"): {"craft": 4, "structure_coherence": 4, "originality": 4, "genre_effectiveness": 4,
                                          "characterization": None},
                       (sharded_id, "ana"): {"craft": 2, "structure_coherence": 2, "originality": 2,
                                             "genre_effectiveness": 2, "characterization": None}}
    (case,) = load_pair_cases(folder / "pair_cases.jsonl", record_ids)
    assert (case.record_a, case.record_b) == (full_id, sharded_id)
    verdicts = {v.rater: v for v in load_pairwise_verdicts(folder / "pairwise_verdicts.jsonl", {case.case_id})}
    for rater, (constraint, quality) in {"ana": ("A clearly better", "B slightly better"),
                                         "ben": ("Tie", "A slightly better")}.items():
        a_condition = _condition_of(shown[rater][0], finals)
        assert verdicts[rater].order == ("primary" if a_condition == "full" else "reversed")
        assert verdicts[rater].verdicts == {"constraint_following": constraint, "creative_quality": quality}

    out = root / "human_validation"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.report", "human-validation", "--scores", str(stories_sweep / "score_records.jsonl"),
         "--pointwise", str(folder / "pointwise_ratings.jsonl"), "--pairwise", str(folder / "pairwise_verdicts.jsonl"),
         "--cases", str(folder / "pair_cases.jsonl"), "--reference", "ana", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    effects = {row["dimension"]: row for row in csv.DictReader((out / "human_paired_effects.csv").open())}
    assert float(effects["craft"]["delta"]) == 2.0  # FULL 4 - SHARDED 2, one pair
    assert effects["characterization"]["n_pairs"] == "0"  # N/A on both
    agreement = {row["dimension"]: row for row in csv.DictReader((out / "pairwise_agreement.csv").open())}
    assert set(agreement) == {"constraint_following", "creative_quality"}
    assert {row["judge"] for row in agreement.values()} == {"ben"}
    page.context.close()


def incremental_column(metric: str, columns) -> str | None:
    """cell_scores.csv's column of a Runs headline (`judge/<judge>/ci` -> `ci`, its rows filtered by judge)."""
    parts = metric.split("/")
    return parts[2] if len(parts) == 3 and parts[0] == "judge" and parts[2] in columns else None


def test_runs_shows_the_reports_per_cell_numbers_with_their_definition(browser, stories_app, stories_sweep, screenshot):
    """Every headline number the Runs tab shows for the incremental sweep (each judge's Creative Integrity and
    adherence per cell) equals the report's per-cell table, which says it is over every scored story with its n;
    the paired table says it uses matched pairs, with theirs."""
    import pandas as pd
    from playwright.sync_api import expect

    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(BROWSER_PATIENCE_MS)
    page.goto(stories_app)
    page.wait_for_selector("#tabs")
    settle(page)
    open_tab(page, "Runs")
    choose(page, "runs-study", "incremental-delivery")
    choose(page, "runs-sweep", SWEEP)
    expect(page.locator("#runs-table")).to_contain_text("sharded")
    cells = pd.read_csv(stories_sweep / "cell_scores.csv")
    for judge, scored in cells.groupby("judge"):
        scored.to_csv(stories_sweep.parent / f"{judge}.csv", index=False)
        compared = runs_match_report(page, stories_sweep.parent / f"{judge}.csv",
                                     {"model": "model", "condition": "condition"},
                                     lambda metric, columns: incremental_column(metric, columns)
                                     if metric.startswith(f"judge/{judge}/") else None)
        assert compared == 2 * 2 - int(scored["ci"].isna().sum()) - int(scored["adherence"].isna().sum()), compared
    expect(page.locator("#runs-note")).to_contain_text("the mean over every item the cell scored")
    assert "n_pairs" in (stories_sweep / "model_ci.csv").read_text().splitlines()[0]
    screenshot(page, "truth-runs-incremental")
    open_tab(page, "Figures")
    choose(page, "figures-sweep", SWEEP)
    expect(page.locator("#figures-table-0")).to_contain_text("over its matched pairs")
    page.context.close()


def test_a_failing_judge_is_warned_in_conversations_and_annotate_agreement(browser, stories_app, stories_env,
                                                                          screenshot):
    """Conversations showed every checklist item of a failed judge as 1.0 without a word, and Annotate's agreement
    tables compared ratings with it silently: both now carry the one warning (its rubric dimensions and the
    agreement columns under their labels). Runs after the rating test, so the agreement has ratings to compare."""
    import mlflow
    from playwright.sync_api import expect

    from narrative_eval.annotations.store import AnnotationStore

    root, env = stories_env
    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("incremental-delivery").experiment_id
    runs = client.search_runs([experiment], f"tags.`narrative_eval.sweep` = '{SWEEP}' and tags.`narrative_eval.kind` = 'cell'")
    tag = f"judge_check/{JUDGE}"
    for run in runs:
        client.set_tag(run.info.run_id, tag, "fail: other_task_story")
    try:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.set_default_timeout(BROWSER_PATIENCE_MS)
        warning = f"judge {JUDGE} failed checks: Other task story"
        finals = page.locator("#conv-finals")

        def loaded_with_the_tags() -> bool:
            page.goto(stories_app)
            page.wait_for_selector("#tabs")
            settle(page)
            open_tab(page, "Conversations")
            choose(page, "conv-sweep", SWEEP)
            expect(finals).to_contain_text("FULL")
            return warning in finals.inner_text()

        # The app answers the judge checks from memory for a few seconds (ui.common.CACHE_SECONDS) after it last read
        # them, and a test before this one may have read them just now, before the tags were set: the page is loaded
        # until it shows them.
        wait_until(loaded_with_the_tags, "the Conversations tab to show the judge-check tags set by the test",
                   interval=1.0)
        expect(finals.locator(".judge-check-failed")).to_contain_text(warning)
        expect(finals).not_to_contain_text("structure_coherence")
        screenshot(page, "truth-conversations-judge-warning")
        open_tab(page, "Annotate")
        open_tab(page, "Stories (incremental delivery)")
        if not AnnotationStore(root / "annotations.sqlite").ratings():
            _rate_one_story(page, "cara")  # run alone, without the rating test's ratings
        page.get_by_text("Agreement of story ratings with the judge").click()
        page.locator("#stories-few-compute").click()
        expect(page.locator("#stories-few")).to_contain_text(warning)
        screenshot(page, "truth-annotate-agreement-judge-warning")
        page.context.close()
    finally:
        for run in runs:
            client.delete_tag(run.info.run_id, tag)


def _rate_one_story(page, rater: str) -> None:
    """`rater` rates the first story offered, pointwise, in the open Stories tab."""
    from playwright.sync_api import expect

    page.locator("#annotate-rater textarea, #annotate-rater input").first.fill(rater)
    choose(page, "stories-sweep", SWEEP)
    page.locator("#stories-next").click()
    expect(page.locator("#stories-item .checklist li").first).to_be_visible()
    for key in ("craft", "structure_coherence", "originality", "genre_effectiveness"):
        page.locator(f"#stories-{key}").get_by_text("3", exact=True).click()
    page.locator("#stories-characterization").get_by_text("N/A", exact=True).click()
    page.locator("#stories-submit").click()
    expect(page.locator("#stories-progress")).to_contain_text("1 of 2")


def _turns(env: dict[str, str], tmp_path: Path) -> dict[str, list[str]]:
    """condition -> the user turns of the sweep's one conversation, in order, read straight from MLflow."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("incremental-delivery").experiment_id
    turns = {}
    for run in client.search_runs([experiment], f"tags.`narrative_eval.sweep` = '{SWEEP}' and tags.`narrative_eval.kind` = 'cell'"):
        with open(client.download_artifacts(run.info.run_id, "conversations.json", str(tmp_path))) as handle:
            payload = json.load(handle)
        rows = sorted((dict(zip(payload["columns"], row)) for row in payload["data"]), key=lambda row: row["turn"])
        turns[run.data.params["condition"]] = [row["user"] for row in rows]
    return turns


def _shows_conversation(page, condition: str, turns: dict[str, list[str]]) -> None:
    """The condition picker says `condition` and the chat is that conversation: its turns, each in its own bubble."""
    from playwright.sync_api import expect

    expect(page.locator("#conv-condition input")).to_have_value(condition)
    users = page.locator("#conv-chat [data-testid='user']")
    expect(users).to_have_count(len(turns[condition]))
    expect(users.last).to_contain_text(_words(turns[condition][-1])[:60])


@pytest.mark.parametrize("apart_ms", [HUMAN_FAST_MS, MACHINE_FAST_MS], ids=["human-fast", "machine-fast"])
def test_conversations_shows_the_conversation_its_pickers_name(browser, stories_app, stories_env, screenshot, tmp_path,
                                                               apart_ms):
    """'Conversation to read: sharded' sat over the FULL chat in 2 of 4 page loads (the load's view and the pickers'
    views raced), and the chat's label covered its first line. Every load, and every pick however fast, now shows
    the conversation the pickers name."""
    _, env = stories_env
    turns = _turns(env, tmp_path)
    assert len(turns["full"]) == 1 and len(turns["sharded"]) > 1, turns
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(60_000)
    for _ in range(3):
        page.goto(stories_app)
        page.wait_for_selector("#tabs")
        page.get_by_role("tab", name="Conversations").click()
        _shows_conversation(page, "sharded", turns)
    settle(page)
    screenshot(page, f"views-conversations-load-{apart_ms}ms")
    for condition in ("full", "sharded", "full"):
        pick(page, "conv-condition", condition)
        pause(page, apart_ms)
    _shows_conversation(page, "full", turns)
    screenshot(page, f"views-conversations-picks-{apart_ms}ms")
    context.close()
