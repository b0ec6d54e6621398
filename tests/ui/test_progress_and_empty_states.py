"""In headless Chromium at 1440 px: Launch names the sweep's stages with their counts and says in words what a stop
did; Compare, Figures and Annotate say why they have nothing to show; Fill live labels its metrics, explains how the
fill was extracted and flags a fill that repeats the passage. No user mistake leaves a traceback in the app's log."""

from __future__ import annotations

import re
import sys

import pytest
from browser_helpers import choose, open_tab, settle

from narrative_eval.backends import RequestCache, get_backend, request_key
from narrative_eval.records import GenerationParams, InfillingInstance, Reply
from narrative_eval.studies.infilling.prompts import render_infilling
from narrative_eval.sweep import AFTER_CELLS, REPORT_STEP
from tests.waiting import PATIENCE_MS
from ui import jobs
from ui.common import AppSettings, model_catalog
from ui.live import catalog_spec

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

WIDTH = 1440
STAGES_SWEEP = "ui-stages"
ONE_LINE_HEADERS = """els => els.map(th => {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    const tops = new Set();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        for (const rect of range.getClientRects()) if (rect.width > 0) tops.add(Math.round(rect.top));
    }
    return [th.innerText.trim(), tops.size];
})"""
"""Each header's text and the number of lines it takes on screen."""
REPORT_STAND_IN = f"""
import threading

from experiments.progress import plain_progress
for _ in plain_progress([None], "cells", 1):
    pass
for _ in plain_progress([None], "{AFTER_CELLS}: {REPORT_STEP}", 1):
    threading.Event().wait()
"""
"""A sweep's last moments as its progress file tells them: its one cell done, its report being written until it is
stopped (a report that ended by itself first, on a machine slow to reach the stop, would say something else)."""


@pytest.fixture()
def wide(page):
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    return page


def app_log(ui_paths) -> str:
    return (ui_paths["reports"].parent / "app.log").read_text(errors="replace")


def pick_option(page, elem_id: str, typed: str, name: str) -> None:
    """Type `typed` into a dropdown and pick the option whose label matches `name` (a regex)."""
    settle(page)
    box = page.locator(f"#{elem_id} input").first
    box.click()
    box.fill(typed)  # the list narrows to the option wanted
    page.get_by_role("option", name=re.compile(name)).first.click()
    box.blur()


def type_custom(page, elem_id: str, text: str) -> None:
    """Type a value a dropdown does not list (it allows custom values) and commit it."""
    settle(page)
    box = page.locator(f"#{elem_id} input").first
    box.fill(text)
    box.press("Enter")
    settle(page)


def test_launch_names_the_stages_and_says_what_a_stop_kept(wide, ui_paths, screenshot, stops_its_jobs):
    from playwright.sync_api import expect

    page, log_start = wide, len(app_log(ui_paths))
    open_tab(page, "Launch")
    page.locator("#launch-sweep textarea, #launch-sweep input").first.fill(STAGES_SWEEP)
    for level in ("L0", "L4"):  # after L2: its first cell is the test sweep's, answered from the request cache
        pick_option(page, "launch-levels", level, rf"(^|\s){level} —")
    choose(page, "launch-judge", "smollm2-judge")
    pick_option(page, "launch-data", "sample.jsonl", r"infilling.sample\.jsonl$")
    page.locator("#launch-limit input").fill("3")
    page.locator("#launch-max-tokens input").fill("40")
    page.locator("#launch-go").click()
    message = page.locator("#launch-message")
    expect(message).to_contain_text("Started")
    # No overlay on it (the click's status can still be settling in the page when the text arrives).
    overlay = page.locator("#launch-message .progress-text:visible, #launch-message .eta-bar:visible")
    expect(overlay).to_have_count(0)
    job_id = next(j.job_id for j in jobs.list_jobs(ui_paths["jobs"]) if j.sweep == STAGES_SWEEP)
    bars = page.locator("#launch-progress")
    expect(bars).to_contain_text("cells 1/3", timeout=PATIENCE_MS)  # the first cell done, the second under way
    for stage in ("generate", "score", "judge smollm2-judge", "report", "save to MLflow"):
        expect(bars).to_contain_text(stage)
    expect(bars).to_contain_text(re.compile(r"generate \d+/\d+"))
    percent = int(re.search(r"(\d+)%", bars.inner_text()).group(1))
    assert 25 <= percent < 75, bars.inner_text()  # one cell of three and the report still to do
    screenshot(page, "launch-stages")

    headers = page.locator("#jobs-table th").evaluate_all(ONE_LINE_HEADERS)
    assert all(lines == 1 for text, lines in headers if text), headers  # "cells", never "cell s"
    log = "\n".join(page.locator("#launch-log .log-lines").all_inner_texts())
    whole_lines = set(open(next(j.log_path for j in jobs.list_jobs(ui_paths["jobs"]) if j.job_id == job_id)).read()
                      .replace("\r", "\n").splitlines())
    assert all(line.rstrip() in {w.rstrip() for w in whole_lines} for line in log.splitlines()), log
    assert "Warning:" not in log and "torchao" not in log, log

    choose(page, "launch-cancel-id", job_id)
    page.locator("#launch-cancel").click()
    expect(message).to_contain_text(re.compile(r"stopped after [12] of 3 cells; the finished cells are kept"))
    expect(message).not_to_contain_text("exit status")
    expect(page.locator("#jobs-table")).to_contain_text("stopped")
    screenshot(page, "launch-stopped")
    assert "Traceback" not in app_log(ui_paths)[log_start:]


def test_a_stop_while_the_report_is_written_says_the_sweep_had_finished(wide, ui_paths, app_env, repo_root, screenshot,
                                                                       stops_its_jobs):
    from playwright.sync_api import expect

    page = wide
    job = jobs.start_job(ui_paths["jobs"], study="infilling", sweep="ui-report-stop", total_cells=1, cwd=repo_root,
                         env=app_env, command=[sys.executable, "-c", REPORT_STAND_IN],
                         stages=(["generate"], [REPORT_STEP, "save to MLflow"]))
    open_tab(page, "Launch")
    bars = page.locator("#launch-progress")
    expect(bars).to_contain_text("✓ cells 1/1")
    expect(bars).to_contain_text("▸ report 0/1")
    assert "100%" not in bars.inner_text()
    screenshot(page, "launch-report-stage")
    choose(page, "launch-cancel-id", job.job_id)
    page.locator("#launch-cancel").click()
    message = page.locator("#launch-message")
    expect(message).to_contain_text("the sweep had finished; its report was interrupted — rerun to write it")
    screenshot(page, "launch-report-interrupted")


def test_compare_says_why_it_shows_no_instance(wide, e2e_sweep, ui_paths, app_env, monkeypatch, screenshot):
    from playwright.sync_api import expect

    from ui import compare
    from ui.common import cell_runs, study_named

    page, log_start = wide, len(app_log(ui_paths))
    open_tab(page, "Compare")
    choose(page, "compare-sweep", e2e_sweep)
    view = page.locator("#compare-view")
    expect(view.locator(".run-card").first).to_be_visible(timeout=60_000)
    page.locator("#compare-high input").check()
    settle(page)
    # Which fills the test sweep's judge rated above 4, read from the app's store as the tab reads it.
    for key in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT"):
        monkeypatch.setenv(key, app_env[key])
    study = study_named(None)  # the first single-turn study registered: infilling, the tab's default
    runs = list(cell_runs(study.experiment, e2e_sweep)["run_id"])
    high = compare.instance_order(study, runs, 0, False, high_only=True)
    if high:
        expect(view.locator(".run-card").first).to_be_visible()
        expect(view).not_to_contain_text("rated above 4 by")
    else:
        expect(view).to_contain_text("None of this sweep's fills was rated above 4 by smollm2-judge")
        expect(view).not_to_contain_text("No finished runs")
    screenshot(page, "compare-none-rated-above-4")
    page.locator("#compare-high input").uncheck()
    type_custom(page, "compare-sweep", "no-such-sweep")
    expect(view).to_contain_text("No sweep named no-such-sweep in experiment infilling")
    screenshot(page, "compare-unknown-sweep")
    assert "Traceback" not in app_log(ui_paths)[log_start:]


def test_figures_clears_the_previous_report_for_an_unknown_sweep(wide, e2e_sweep, ui_paths, screenshot):
    from playwright.sync_api import expect

    page, log_start = wide, len(app_log(ui_paths))
    open_tab(page, "Figures")
    choose(page, "figures-sweep", e2e_sweep)
    tab = page.locator("#tab-figures")
    main_table = re.compile(r"main\s?\.csv")  # the report's main table, to download
    expect(tab).to_contain_text(main_table)
    type_custom(page, "figures-sweep", "no-such-sweep")
    expect(tab).to_contain_text("No report folder no-such-sweep/")
    expect(tab).not_to_contain_text(main_table)
    screenshot(page, "figures-unknown-sweep")
    assert "Traceback" not in app_log(ui_paths)[log_start:]


def test_annotate_says_why_the_agreement_tables_are_empty(wide, e2e_sweep, screenshot):
    from playwright.sync_api import expect

    page = wide
    open_tab(page, "Annotate")
    page.get_by_text("Agreement with the judge").click()
    few = page.locator("#annotate-few")
    expect(few).to_contain_text("The tables stay empty until you press Compute")
    screenshot(page, "annotate-agreement-before-compute")
    page.locator("#annotate-fills-tab").get_by_role("button", name="Compute").click()
    expect(few).not_to_contain_text("until you press Compute")
    expect(few).to_contain_text(re.compile(r"No judge scored|No rated item|too uncertain|^$"))
    screenshot(page, "annotate-agreement-computed")


def test_fill_live_labels_metrics_explains_extraction_and_flags_an_echo(wide, ui_paths, screenshot):
    """The model's reply comes from the request cache the tab reads first: an echo of the passage with its blank kept,
    as small models give, so the flag is seen every time."""
    from playwright.sync_api import expect

    page, log_start = wide, len(app_log(ui_paths))
    before, after = "The keeper climbed the lighthouse stairs at dusk.", "By midnight three boats were safe in the harbour."
    passage, gold = f"{before} ______ {after}", "He lit the great lamp and watched the sea."
    instance = InfillingInstance(dataset="custom", ref_id="live", source_text=passage, problem=passage, gold_answer=gold,
                                 n=1, unit_idx=0)
    params = GenerationParams(temperature=0.3, max_new_tokens=96, seed=0)  # the tab's defaults
    smollm2 = get_backend(catalog_spec(model_catalog(AppSettings()), "smollm2"))  # the tab's model, as it loads it
    key = request_key(smollm2, render_infilling("L2", instance), params)
    cache = RequestCache()
    cache.put_many([(key, Reply(text=f"Here is the passage: {before} ______ {after}"))])
    cache.close()

    open_tab(page, "Fill live")
    choose(page, "live-model", "smollm2")
    page.locator("#live-passage textarea").fill(passage)
    page.locator("#live-gold textarea").fill(gold)
    page.locator("#live-go").click()
    status = page.locator("#live-status")
    expect(status).to_contain_text("This fill repeats the passage", timeout=PATIENCE_MS)
    expect(status).to_contain_text("extraction: fallback — the reply had no <ANSWER> tags")
    metrics = page.locator("#live-metrics")
    for shown in ("AtAvg", "BERTScore", "ROUGE-1", "METEOR", "chrF", "Sem-F1"):
        expect(metrics).to_contain_text(shown, timeout=PATIENCE_MS)
    for raw in ("at_avg", "bertscore", "rouge1"):
        expect(metrics).not_to_contain_text(raw)
    screenshot(page, "fill-live-echo-flagged")
    assert "Traceback" not in app_log(ui_paths)[log_start:]
