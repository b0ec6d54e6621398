"""Every view shows what its controls say, however fast they are changed, in headless Chromium at 1440 px: the Runs
table has exactly the column sets ticked, a Figures switch draws the picked sweep's report whole, and the screens
of a study other than infilling speak its words. Each action comes at a quick user's pace (0.7 s apart) and at a
machine's (0.1 s apart); what the page shows after them is waited for as a condition."""

from __future__ import annotations

import shutil

import pytest
from browser_helpers import HUMAN_FAST_MS, MACHINE_FAST_MS, choose, console_errors, open_tab, pause, pick, settle

from narrative_eval.reports.catalog import report_tables
from ui.figures import heading

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

PACES = pytest.mark.parametrize("apart_ms", [HUMAN_FAST_MS, MACHINE_FAST_MS], ids=["human-fast", "machine-fast"])


def _expected_headers(app_env, monkeypatch, sweep: str, sets: list[str]) -> list[str]:
    """The Runs table's headers for these column sets, as the app's own code makes them from the app's store."""
    from ui.common import AppSettings
    from ui.runs import runs_table

    for key in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT"):
        monkeypatch.setenv(key, app_env[key])
    table, _ = runs_table("infilling", sweep, [], [], [], "", "", AppSettings(), sets)
    return list(table.columns)


@PACES
def test_runs_columns_are_those_of_the_ticked_sets(page, e2e_sweep, app_env, monkeypatch, screenshot, apart_ms):
    """Ticking "Judge dimensions" then "Extraction" 0.7 s later left both ticked with only the first set's columns,
    for good (a click while the table was drawn was dropped); ticking all of them quickly added two sets' columns."""
    from playwright.sync_api import expect

    open_tab(page, "Runs")
    choose(page, "runs-study", "infilling")
    choose(page, "runs-sweep", e2e_sweep)
    settle(page)
    boxes = page.locator("#runs-sets label")
    names = [name.strip() for name in boxes.all_inner_texts()]
    assert {"Judge dimensions", "Extraction"} <= set(names) and len(names) >= 4, names
    headers = page.locator("#runs-table th")

    first = ["Judge dimensions", "Extraction"]
    for index, name in enumerate(first):
        if index:
            pause(page, apart_ms)
        page.locator("#runs-sets").get_by_label(name, exact=True).check()
    expect(headers).to_have_text(_expected_headers(app_env, monkeypatch, e2e_sweep, first))

    for name in names:
        if name not in first:
            pause(page, apart_ms)
            page.locator("#runs-sets").get_by_label(name, exact=True).check()
    expect(headers).to_have_text(_expected_headers(app_env, monkeypatch, e2e_sweep, names))
    for name in names:
        expect(page.locator("#runs-sets").get_by_label(name, exact=True)).to_be_checked()
    screenshot(page, f"views-runs-every-set-{apart_ms}ms")

    for name in names[1:]:
        pause(page, apart_ms)
        page.locator("#runs-sets").get_by_label(name, exact=True).uncheck()
    expect(headers).to_have_text(_expected_headers(app_env, monkeypatch, e2e_sweep, names[:1]))


def _figures_sweeps(page, ui_paths, continuation_sweep) -> str:
    """A second report folder beside the test sweep's (the shared continuation sweep's report, copied), listed."""
    folder = ui_paths["reports"] / continuation_sweep.name
    if not folder.exists():
        shutil.copytree(continuation_sweep.config.parent / "report", folder)
    open_tab(page, "Figures")
    page.locator("#figures-refresh").click()
    settle(page)
    return continuation_sweep.name


def _shows_report(page, ui_paths, sweep: str) -> None:
    """The Figures tab shows `sweep`'s report, whole: its status, every table in order, no other's."""
    from playwright.sync_api import expect

    expect(page.locator("#figures-sweep input")).to_have_value(sweep)
    expect(page.locator("#figures-status")).to_contain_text(f"{sweep}/")
    expected = [heading(table) for table in report_tables(ui_paths["reports"] / sweep)]
    expect(page.locator(".figures-table > summary")).to_have_text(expected)
    expect(page.locator("#figures-table-0 .report-table tbody tr").first).to_be_visible()


@PACES
def test_a_figures_switch_draws_the_picked_sweeps_report_whole(page, e2e_sweep, continuation_sweep, ui_paths,
                                                               screenshot, apart_ms):
    """Picking the quickstart sweep, then the continuation one, left the quickstart's status over an empty main table,
    two `e.trim is not a function` errors in the console, and a dropdown that no longer opened."""
    errors = console_errors(page)
    other = _figures_sweeps(page, ui_paths, continuation_sweep)
    pick(page, "figures-sweep", e2e_sweep)
    pause(page, apart_ms)
    pick(page, "figures-sweep", other)
    _shows_report(page, ui_paths, other)
    screenshot(page, f"views-figures-switch-{apart_ms}ms")
    # The dropdown still opens, and a switch back draws the first report again.
    pick(page, "figures-sweep", e2e_sweep)
    _shows_report(page, ui_paths, e2e_sweep)
    settle(page)
    assert not errors, errors


def test_a_continuation_sweep_reads_in_its_own_words(page, continuation_sweep, e2e_sweep, ui_paths, screenshot):
    """The continuation screens showed raw field names ('opening', 'Reference (next_sentence)'), the infilling study's
    words ('Levels / paradigms', 'Only fills ...'), counts as scores (n_instances 4.00) and '1 tables'."""
    from playwright.sync_api import expect

    open_tab(page, "Runs")
    choose(page, "runs-study", "continuation")
    choose(page, "runs-sweep", continuation_sweep.name)
    expect(page.locator("#runs-table")).to_contain_text("guided")
    runs = page.locator("#tab-runs")
    expect(runs).not_to_contain_text("Levels / paradigms")
    expect(runs).to_contain_text("Prompt settings (all when empty)")
    page.locator("#runs-sets").get_by_label("Counts", exact=True).check()
    counts = page.locator("#runs-table th[title^='n_']")
    expect(counts.first).to_be_visible()
    headers = page.locator("#runs-table th").all_inner_texts()
    column, status = headers.index(counts.first.inner_text()), headers.index("status")
    # The Launch test (tests/ui/test_truthful_app.py) adds a broken model's FAILED cells to this sweep: they logged
    # no counts ('–'). Every finished cell's count is a whole number.
    rows = page.locator("#runs-table tbody tr")
    finished = [row.locator("td").all_inner_texts() for row in rows.all()
                if row.locator("td").nth(status).inner_text().strip() == "FINISHED"]
    assert finished, rows.all_inner_texts()
    for cells in finished:
        assert cells[column].strip().isdigit(), cells  # a count, never '4.00'
    screenshot(page, "views-runs-continuation-words")

    open_tab(page, "Compare")
    choose(page, "compare-study", "continuation")
    choose(page, "compare-sweep", continuation_sweep.name)
    view = page.locator("#compare-view")
    expect(view.locator(".gold")).to_contain_text("Reference (Next sentence)")
    expect(view.locator(".gold-card .card-title")).to_contain_text("Opening")
    expect(page.locator("#compare-high")).to_contain_text("Only continuations a judge rated above 4")
    screenshot(page, "views-compare-continuation-words")

    other = _figures_sweeps(page, ui_paths, continuation_sweep)
    choose(page, "figures-sweep", other)
    status = page.locator("#figures-status")
    expect(status).to_contain_text(f"{other}/")
    assert " 1 tables" not in status.inner_text() and " 1 figures" not in status.inner_text()
