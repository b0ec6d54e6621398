"""Fixtures for the app's end-to-end tests: a tiny real sweep, the app in a subprocess, headless Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import BROWSER_PATIENCE_MS, CHROMIUM_ARGS, VIEWPORT, settle
from job_helpers import wait_until_ended

from tests.servers import start_app, stop
from ui import jobs

REPO = Path(__file__).resolve().parents[2]
# The app package lives at the repo root (not in the installed library); `pytest` alone does not put it on sys.path.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SCREENSHOTS = REPO / "tests" / "ui" / "screenshots"
"""Where the browser tests save what they saw (full pages at VIEWPORT), as artifacts."""
E2E_SWEEP = "ui-e2e"


@pytest.fixture(scope="session")
def e2e_sweep(ui_paths, app_env) -> str:
    """Two embedded models (smollm2, gemma3) x one level on three shipped instances, judged, into the test store.
    Without the judge's control items: what the app shows of a judge's checks comes from run tags the tests set
    (test_paper_tables.py), a launched job runs the checks (test_research_tool.py), and tests/test_sweep_judge_checks.py
    checks the checks themselves."""
    command = [
        sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/quickstart.yaml",
        "--set", f"sweep={E2E_SWEEP}", "--set", "models=[smollm2,gemma3]", "--set", "prompt_settings=[L2]",
        "--set", "generation.max_new_tokens=40", "--set", f"report_dir={ui_paths['reports']}/{{sweep}}",
        "--set", "judge_checks=false", "--limit", "3", "--no-progress",
    ]
    result = subprocess.run(command, cwd=REPO, env=app_env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return E2E_SWEEP


@pytest.fixture()
def stops_its_jobs(ui_paths):
    """A test that fails while its job runs stops the job, so the next test is not refused by the one-job limit."""
    started_before = {job.job_id for job in jobs.list_jobs(ui_paths["jobs"])}
    yield
    for job in jobs.active_jobs(ui_paths["jobs"]):
        if job.job_id not in started_before:
            jobs.cancel_job(job)
            wait_until_ended(ui_paths["jobs"], job.job_id)


@pytest.fixture(scope="session")
def app_url(e2e_sweep, ui_paths, app_env):
    """The app on 127.0.0.1 at a free port, in a subprocess sharing the test's MLflow store."""
    process, url = start_app(["--reports-dir", str(ui_paths["reports"]), "--jobs-dir", str(ui_paths["jobs"]),
                              "--annotations", str(ui_paths["annotations"])],
                             ui_paths["reports"].parent / "app.log", app_env)
    yield url
    stop(process)


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (make install-test installs it)")
    from playwright.sync_api import expect, sync_playwright

    # Expectations wait as long as the pages' actions instead of Playwright's 5 s: on a loaded machine the app took
    # longer than 5 s to answer the Annotate tab's "Next" once (the whole suite under coverage, clean clone).
    expect.set_options(timeout=BROWSER_PATIENCE_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture()
def page(browser, app_url):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(BROWSER_PATIENCE_MS)
    page.goto(app_url)
    page.wait_for_selector("#tabs")
    # The page's load events fill every tab (the Runs table first shows a placeholder); let them finish. The first
    # page of a freshly started app took over a minute once, with engines starting on both cores.
    page.wait_for_function("() => !document.querySelector('#runs-table')?.innerText.includes('Loading runs')")
    settle(page)
    yield page
    context.close()


@pytest.fixture(scope="session")
def screenshot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
