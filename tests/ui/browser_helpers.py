"""Steps the browser tests share: open a tab, pick an option of a Gradio dropdown."""

from __future__ import annotations

import re


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
