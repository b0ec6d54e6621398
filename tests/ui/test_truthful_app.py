"""The app tells the truth, in headless Chromium at 1440 px: Launch runs exactly the config typed (a path in no list),
checked before it starts; a failed cell is counted as failed everywhere; a form's mistakes are said under their fields;
and the app's log holds no traceback and no progress bar."""

from __future__ import annotations

import re

import pytest
import yaml
from browser_helpers import choose, open_tab, report_column, runs_match_report, settle
from job_helpers import wait_until_ended

from tests.shared_sweeps import CONTINUATION, CONTINUATION_SWEEP

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

TYPED_SWEEP = CONTINUATION_SWEEP
"""The name the form gives: the shared continuation sweep's, whose finished cells the job then skips."""


def fill(page, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} textarea, #{elem_id} input").first.fill(text)


def typed_config(folder) -> str:
    """The shared continuation sweep's config outside the configs folder (so in no list), with a model whose weights
    file is no GGUF: the embedded SmolLM2's cells are already done (skipped), the broken model's fail."""
    broken = folder / "broken.gguf"
    broken.write_bytes(b"not a model")
    config = {**CONTINUATION, "sweep": "renamed-by-the-form", "judge_checks": False,
              "models": [*CONTINUATION["models"], {"id": "broken", "backend": "llama_cpp", "weights": str(broken)}]}
    path = folder / "my-continuation.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_compare_shows_a_plugin_studys_item_once_and_its_runs_answers_side_by_side(page, continuation_sweep, app_env,
                                                                                  monkeypatch, screenshot):
    """Compare reads any single-turn study from the study object: the example continuation plugin's sweep (before the
    Launch test adds its broken model's cells) shows the item's opening once and each run's sentence after it."""
    from playwright.sync_api import expect

    from ui.common import cell_runs, run_table

    open_tab(page, "Compare")
    choose(page, "compare-study", "continuation")
    choose(page, "compare-sweep", CONTINUATION_SWEEP)
    view = page.locator("#compare-view")
    cards = view.locator(".compare-columns .run-card")
    expect(cards).to_have_count(len(CONTINUATION["prompt_settings"]))
    item = page.locator("#compare-instance input").first.input_value()
    # What each run logged for that item, read from the app's store as the tab reads it.
    for key in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT"):
        monkeypatch.setenv(key, app_env[key])
    rows = [table[(table["item_id"] == item) & (table["seed"] == 0)].iloc[0]
            for table in map(run_table, cell_runs("continuation", CONTINUATION_SWEEP)["run_id"])]
    assert len(rows) == 2 and {row["opening"] for row in rows} == {rows[0]["opening"]}
    expect(view.locator(".gold-card .passage")).to_have_text(rows[0]["opening"])
    expect(view.locator(".gold")).to_contain_text(f"Reference (Next sentence): {rows[0]['next_sentence']}")
    assert sorted(cards.locator("mark").all_inner_texts()) == sorted(row["continuation"] for row in rows if row["continuation"])
    tops = [card.bounding_box()["y"] for card in cards.all()]
    assert abs(tops[0] - tops[1]) < 2, tops  # one row
    screenshot(page, "compare-continuation")


def test_launch_runs_exactly_the_typed_config_and_counts_its_failed_cells(page, ui_paths, screenshot, stops_its_jobs,
                                                                         continuation_sweep, tmp_path):
    from playwright.sync_api import expect

    from ui import jobs

    path = typed_config(tmp_path)
    open_tab(page, "Launch")
    # The grid built in the form is of the study picked: its own prompt settings are offered (the first by default).
    choose(page, "launch-study", "continuation")
    levels = page.locator("#launch-levels")
    expect(levels).to_contain_text("plain — The opening alone")
    expect(levels).not_to_contain_text("L2")
    page.locator("#launch-mode").get_by_text("a config file").click()
    listed = page.locator("#launch-config input")
    listed.fill(path)
    listed.press("Enter")
    fill(page, "launch-sweep", TYPED_SWEEP)
    fill(page, "launch-limit", str(CONTINUATION["limit"]))
    page.locator("#launch-go").click()
    expect(page.locator("#launch-message")).to_contain_text(f"Started {TYPED_SWEEP}")
    expect(page.locator("#launch-error")).to_have_text("")
    job = next(j for j in jobs.list_jobs(ui_paths["jobs"]) if j.sweep == TYPED_SWEEP)
    assert job.study == "continuation" and job.total_cells == 4 and job.config_path == path
    assert job.command[job.command.index("--config") + 1] == path
    wait_until_ended(ui_paths["jobs"], job.job_id, timeout=600)
    table = page.locator("#jobs-table")
    expect(table).to_contain_text("2/4 · 2 failed")
    expect(table).to_contain_text("failed: 2 of 4 cells finished, 2 failed")
    expect(page.locator("#launch-message")).to_contain_text("2 cells failed")
    log = page.locator("#launch-log")
    expect(log).to_contain_text(re.compile(r"error: FAILED broken/plain: ValueError: Failed to load model"))
    assert "Traceback" not in log.inner_text() and "File \"" not in log.inner_text()
    assert "Traceback" in open(job.log_path).read()  # the whole trace stays in the job's log file
    screenshot(page, "truth-launch-typed-config")

    # Exactly that sweep ran: the typed config's study and models, under the name the form gave it.
    open_tab(page, "Runs")
    choose(page, "runs-study", "continuation")
    page.locator("#runs-refresh").click()
    choose(page, "runs-sweep", TYPED_SWEEP)
    rows = page.locator("#runs-table tbody tr")
    expect(rows).to_have_count(4)
    shown = sorted(" ".join(row.split()[:2]) for row in rows.all_inner_texts())
    assert shown == ["broken guided", "broken plain", "smollm2 guided", "smollm2 plain"], shown
    expect(page.locator("#runs-table")).to_contain_text("FAILED")
    expect(page.locator("#runs-sweep")).not_to_contain_text("renamed-by-the-form")
    # Every headline number shown equals the report's main table (the failed cells have none, and no report row).
    main = ui_paths["reports"] / TYPED_SWEEP / "main.csv"
    assert runs_match_report(page, main, {"model": "model", "setting": "setting"}, report_column) == 16
    screenshot(page, "truth-runs-of-the-typed-config")


def test_every_headline_number_of_runs_equals_the_report(page, e2e_sweep, ui_paths, screenshot):
    """The quickstart's numbers in Runs (AtAvg, each metric, the judge's QAvg and High%, each with its interval) are
    the report's main table's, at the decimals shown."""
    from playwright.sync_api import expect

    open_tab(page, "Runs")
    choose(page, "runs-sweep", e2e_sweep)
    expect(page.locator("#runs-table")).to_contain_text("gemma3")
    main = ui_paths["reports"] / e2e_sweep / "main.csv"
    assert runs_match_report(page, main, {"model": "model", "setting": "setting"}, report_column) == 2 * 8
    screenshot(page, "truth-runs-quickstart-numbers")


def test_launch_refuses_what_cannot_run_here_beside_the_form(page, ui_paths, screenshot):
    from playwright.sync_api import expect

    from ui import jobs

    log_path = ui_paths["reports"].parent / "app.log"
    before_jobs, before_log = len(jobs.list_jobs(ui_paths["jobs"])), log_path.stat().st_size
    open_tab(page, "Launch")
    error = page.locator("#launch-error")  # under the buttons: what is about the form as a whole
    # (field, a mistake, the button pressed, what is said under that field, the value then typed to go on)
    mistakes = [("sweep", "../platform", "go", "The sweep name '../platform' cannot be used", "numbers"),
                ("limit", "-5", "go", "Limit: a whole number 0 or more, got -5", "1e12"),
                ("max-tokens", "99999999", "estimate", "Max new tokens: a whole number from 8 to 2,048, got 99,999,999",
                 "16")]
    for field, wrong, button, said, fixed in mistakes:
        fill(page, f"launch-{field}", wrong)
        page.locator(f"#launch-{button}").click()
        expect(page.locator(f"#launch-{field}-error")).to_contain_text(said)
        expect(error).to_have_text("")
        if field == "sweep":
            screenshot(page, "truth-launch-error-under-its-field")
        fill(page, f"launch-{field}", fixed)
    page.locator("#launch-estimate").click()
    expect(page.locator("#launch-estimate-text")).to_contain_text("is not below the data's size: the whole data file runs")
    for field in ("sweep", "limit", "max-tokens"):
        expect(page.locator(f"#launch-{field}-error")).to_have_text("")

    page.locator("#launch-mode").get_by_text("a config file").click()
    typed = page.locator("#launch-config input")
    typed.fill("experiments/configs/incremental.yaml")
    typed.press("Enter")
    fill(page, "launch-sweep", "gpu-grid")
    page.locator("#launch-go").click()
    expect(error).to_contain_text("model llama-3.1-8b cannot run here: it needs a download")
    expect(page.locator(".toast-body")).to_have_count(0)
    screenshot(page, "truth-launch-refused")
    assert len(jobs.list_jobs(ui_paths["jobs"])) == before_jobs
    settle(page)
    with log_path.open() as handle:
        handle.seek(before_log)
        log = handle.read()
    assert "Traceback" not in log and "gradio.exceptions.Error" not in log, log[-3000:]


def test_figures_carries_the_reports_judge_notes(page, e2e_sweep, ui_paths, screenshot):
    """A judge that failed its control checks is marked in Figures as in the report: once over the tables, and under
    each table whose .md carries the report's note, with the check's readable name."""
    import shutil

    from playwright.sync_api import expect

    from narrative_eval.reports.judge_checks import with_judge_checks
    from narrative_eval.stats.judge_checks import CheckRow

    folder = ui_paths["reports"] / "checked-judge"
    shutil.copytree(ui_paths["reports"] / e2e_sweep, folder, dirs_exist_ok=True)
    judge = "smollm2-judge"
    failed = CheckRow(judge=judge, rubric="infilling_narrative", check="mismatched_fill", statistic="discrimination",
                      n=10, n_failed=6, value=0.4, lo=0.1, hi=0.7, threshold=0.8, passed=False, gap=0.0, gap_lo=0.0,
                      gap_hi=0.0, note="")
    main = (folder / "main.md").read_text(encoding="utf-8").strip()
    # The copy stays, the newest report: the tests after this one switch from it to the sweep's own (which lost its
    # last table when the judge's warning came and went, before the warning's block stayed in place).
    with_judge_checks({"Main results": main}, [failed], folder, {"Main results": [judge]})
    open_tab(page, "Figures")
    page.get_by_role("button", name="Refresh").click()
    choose(page, "figures-sweep", "checked-judge")
    warning = f"judge {judge} failed checks: Mismatched fill"
    expect(page.locator("#figures-judge-warning")).to_contain_text(warning)
    expect(page.locator("#figures-table-0 .figures-note")).to_contain_text(warning)
    screenshot(page, "truth-figures-judge-note")


def test_compare_shows_the_passage_once_and_the_runs_side_by_side(page, e2e_sweep, screenshot):
    """Compare stacked each run's whole passage (about 2,400 px for 4 runs): the passage is now shown once, and the
    runs sit in columns on one row, each its fill in a few words of context."""
    from playwright.sync_api import expect

    open_tab(page, "Compare")
    choose(page, "compare-sweep", e2e_sweep)
    view = page.locator("#compare-view")
    cards = view.locator(".compare-columns .run-card")
    expect(cards).to_have_count(2)
    tops = [card.bounding_box()["y"] for card in cards.all()]
    assert abs(tops[0] - tops[1]) < 2, tops  # one row
    expect(view.locator(".gold-card .passage")).to_have_count(1)
    passage = view.locator(".gold-card .passage").inner_text()
    for card in cards.all():
        assert len(card.locator(".passage").inner_text()) < len(passage)
    assert view.bounding_box()["height"] < 1000
    screenshot(page, "truth-compare-side-by-side")


def test_the_apps_log_holds_no_traceback_and_no_progress_bar(app_url, ui_paths):
    """Last in this module (on the worker of the app it reads): whatever the browser tests before it did in this app,
    its log stayed clean."""
    log = (ui_paths["reports"].parent / "app.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    assert not re.search(r"\d+%\|", log) and "Downloading artifacts" not in log, log[-3000:]
