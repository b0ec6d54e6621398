"""What the browser tests share: how Chromium is started, and steps: open a tab, pick an option of a Gradio
dropdown."""

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

VIEWPORT = {"width": 1440, "height": 1000}
"""A laptop screen: every page the tests open (the app's, MLflow's) must read at this width."""

SETTLED = "() => document.querySelectorAll('.progress-text').length === 0"
"""True once no component shows Gradio's 'processing' status."""


def settle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the page's running events are done: a choice made while a tab is still loading would be
    overwritten by that load's outputs (it selects the newest sweep)."""
    page.wait_for_function(SETTLED, timeout=timeout_ms)


def open_tab(page, title: str) -> None:
    page.get_by_role("tab", name=title).click()
    settle(page)


def choose(page, elem_id: str, option: str) -> None:
    """Pick an option of a Gradio dropdown, once the page has settled."""
    settle(page)
    page.locator(f"#{elem_id} input").first.click()
    # A selected option's accessible name carries a check mark before the text.
    page.get_by_role("option", name=re.compile(rf"(^|\s){re.escape(option)}$")).first.click()
