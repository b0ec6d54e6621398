"""A judge that failed its control checks, in the app: Launch's last message says the judge failed, its output box
draws the report's tables as tables, and its jobs table fits a 1440 px page. (A report's record of the tables it could not
write is tested in tests/reports/test_creative.py; Figures' mark of it is not yet tested in a browser.)"""

from __future__ import annotations

import pytest
import yaml
from browser_helpers import open_tab
from job_helpers import wait_until_ended

from narrative_eval.reports.judge_checks import judge_warning, sweep_failing_judges
from narrative_eval.study import experiment_of
from tests.shared_sweeps import CONTINUATION, tracking_store

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

CHECKED_SWEEP = "continuation-checked"


def test_launch_says_the_judge_failed_draws_the_tables_and_fits_1440(page, ui_paths, app_env, screenshot,
                                                                      stops_its_jobs, continuation_sweep, tmp_path):
    """Launch's last line read "finished: 2 of 2 cells and its report" while only the raw output said the judge had
    failed its checks; the output showed the report's tables as raw pipes, and the jobs table was cut at 1440 px."""
    from playwright.sync_api import expect

    from ui import jobs

    # The shared continuation sweep's cells (answered by the request cache), with two control items per judge: too
    # few for an interval to clear chance, so the embedded judge fails its checks.
    path = tmp_path / "checked-continuation.yaml"
    path.write_text(yaml.safe_dump({**CONTINUATION, "judge_checks": {"items": 2}}, sort_keys=False))
    open_tab(page, "Launch")
    page.locator("#launch-mode").get_by_text("a config file").click()
    box = page.locator("#launch-config input")
    box.fill(str(path))
    box.press("Enter")
    page.locator("#launch-sweep textarea, #launch-sweep input").first.fill(CHECKED_SWEEP)
    page.locator("#launch-go").click()
    message = page.locator("#launch-message")
    expect(message).to_contain_text(f"Started {CHECKED_SWEEP}")
    job = next(j for j in jobs.list_jobs(ui_paths["jobs"]) if j.sweep == CHECKED_SWEEP)
    job = wait_until_ended(ui_paths["jobs"], job.job_id, timeout=900)
    assert job.status == "finished", jobs.log_tail(job)
    with tracking_store(app_env):
        failing = sweep_failing_judges(experiment_of(job.study), CHECKED_SWEEP)
    assert list(failing) == ["smollm2-judge"], failing
    expect(message).to_contain_text("finished: 2 of 2 cells and its report")
    expect(message).to_contain_text(judge_warning("smollm2-judge", failing["smollm2-judge"]))

    log = page.locator("#launch-log")
    expect(log.locator("table.log-table").first).to_be_visible()
    expect(log.locator(".log-title", has_text="Judge control checks")).to_have_count(1)
    assert "|---" not in log.inner_text() and "| judge" not in log.inner_text()
    # The jobs table fits the page: no column cut, nothing to scroll sideways.
    table = page.locator("#jobs-table")
    expect(table).to_contain_text(CHECKED_SWEEP)
    fits = table.evaluate("e => { const t = e.querySelector('table'); const box = t.parentElement;"
                          " return [t.getBoundingClientRect().right, e.getBoundingClientRect().right,"
                          " box.scrollWidth - box.clientWidth, document.documentElement.scrollWidth]; }")
    assert fits[0] <= fits[1] + 1 and fits[2] <= 1 and fits[3] <= 1440, fits
    screenshot(page, "launch-judge-failed")
