"""What the browser tests share: how Chromium is started, and steps: open a tab, open the Annotate tab as a rater,
pick an option of a Gradio dropdown."""

from __future__ import annotations

import re


# Chromium keeps only the last --disable-features it is given, so this one repeats Playwright's own list (its
# chromiumSwitches, Playwright 1.65) and adds the two omnibox popups: Chromium 156 otherwise renders them as pages in a
# renderer of its own for every browser context, unseen in headless mode (0.6 CPU s each, one per test page).
# test_browser_flags.py checks the list against the installed Playwright's.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying",
    "AimEnabled", "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion")
OMNIBOX_POPUPS = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + OMNIBOX_POPUPS)]

BROWSER_PATIENCE_MS = 300_000
"""How long a page action or an expectation may wait for the app (Playwright's default is 5 s): a safety net against a
state that never comes, not an expectation of speed. The app answers within seconds on an idle machine; with four test
runs on two cores a tab's load took minutes. A wait on a model's reply (a live fill) may say longer."""

VIEWPORT = {"width": 1440, "height": 1000}
"""A laptop screen: every page the tests open (the app's, MLflow's) must read at this width."""

SETTLED = "() => document.querySelectorAll('.progress-text').length === 0"
"""True once no component shows Gradio's 'processing' status."""


def settle(page, timeout_ms: int = BROWSER_PATIENCE_MS) -> None:
    """Wait until the page's running events are done: a choice made while a tab is still loading would be
    overwritten by that load's outputs (it selects the newest sweep)."""
    page.wait_for_function(SETTLED, timeout=timeout_ms)


def open_tab(page, title: str) -> None:
    page.get_by_role("tab", name=title).click()
    settle(page)


def annotate_page(browser, url: str, rater: str, viewport: dict[str, int] = VIEWPORT, timeout_ms: int = 60_000):
    """A new page on the app at `url`, its Annotate tab open with `rater` typed as the rater's name."""
    page = browser.new_context(viewport=viewport).new_page()
    page.set_default_timeout(timeout_ms)
    page.goto(url)
    page.wait_for_selector("#tabs")
    settle(page)
    open_tab(page, "Annotate")
    page.locator("#annotate-rater textarea, #annotate-rater input").first.fill(rater)
    return page


def choose(page, elem_id: str, option: str) -> None:
    """Pick an option of a Gradio dropdown, once the page has settled."""
    settle(page)
    page.locator(f"#{elem_id} input").first.click()
    # A selected option's accessible name carries a check mark before the text.
    page.get_by_role("option", name=re.compile(rf"(^|\s){re.escape(option)}$")).first.click()


def pick(page, elem_id: str, option: str) -> None:
    """Pick an option of a Gradio dropdown at once, as a fast user does: without waiting for the page's events."""
    page.locator(f"#{elem_id} input").first.click()
    page.get_by_role("option", name=re.compile(rf"(^|\s){re.escape(option)}$")).first.click()


HUMAN_FAST_MS = 700
"""A quick user's pause between two actions (the issue's second box ticked 0.7 s after the first)."""
MACHINE_FAST_MS = 100
"""Actions 100 ms apart: faster than any view is drawn, so each action arrives while the last one's events run."""


def pause(page, ms: int) -> None:
    """The user's own pause between two actions, `ms` long, timed in the page. It paces the input; what the app shows
    after it is always waited for as a condition."""
    page.evaluate("ms => new Promise(done => setTimeout(done, ms))", ms)


def console_errors(page) -> list[str]:
    """A list that collects, from now on, the page's uncaught errors and console errors (Gradio's `e.trim is not a
    function` when an update sent a component a value of another kind)."""
    found: list[str] = []
    page.on("pageerror", lambda error: found.append(str(error)))
    page.on("console", lambda message: found.append(message.text) if message.type == "error" else None)
    return found


def runs_shown(page) -> list[dict[str, str]]:
    """The Runs table as shown: one dict per row, each cell's text under its column's logged name (the header's
    tooltip), a number's interval after it ('0.322 [0.251, 0.380]')."""
    headers = page.locator("#runs-table th")
    names = [headers.nth(i).get_attribute("title") or "" for i in range(headers.count())]
    return [dict(zip(names, (" ".join(text.split()) for text in row.locator("td").all_inner_texts()), strict=True))
            for row in page.locator("#runs-table tbody tr").all()]


def runs_match_report(page, report_csv, keys: dict[str, str], column_of) -> int:
    """Assert every number the Runs tab shows equals the report's CSV at the decimals shown (its interval too); rows
    the report has none of show no number. `keys`: Runs column -> report column naming a row; `column_of(metric,
    columns)`: the report's column of a logged metric (None: not in this table). Returns how many numbers matched."""
    import pandas as pd

    report = pd.read_csv(report_csv)
    compared = 0
    for row in runs_shown(page):
        found = report
        for shown, column in keys.items():
            found = found[found[column].astype(str) == row[shown]]
        numbers = {name: text for name, text in row.items()
                   if name not in keys and column_of(name, report.columns) is not None}
        if found.empty:
            assert all(text.startswith("–") for text in numbers.values()), (row, "has numbers but no report row")
            continue
        (values,) = found.to_dict("records")
        for name, text in numbers.items():
            column = column_of(name, report.columns)
            mean, _, interval = text.partition(" ")
            if mean == "–":
                assert pd.isna(values[column]), (name, text, values[column])
                continue
            decimals = len(mean.partition(".")[2])
            assert mean == f"{values[column]:.{decimals}f}", (row, name, text, values[column])
            if interval and f"{column}_lo" in values:
                assert interval == f"[{values[column + '_lo']:.{decimals}f}, {values[column + '_hi']:.{decimals}f}]", \
                    (row, name, text)
            compared += 1
    return compared


def report_column(metric: str, columns) -> str | None:
    """The report column of a logged headline metric: its own name, or `<judge>:<number>` for `judge/<judge>/<number>`."""
    if metric in columns:
        return metric
    parts = metric.split("/")
    if len(parts) == 3 and parts[0] == "judge" and f"{parts[1]}:{parts[2]}" in columns:
        return f"{parts[1]}:{parts[2]}"
    return None
