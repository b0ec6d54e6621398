"""Steps the browser tests share: open a tab, pick an option of a Gradio dropdown."""

from __future__ import annotations

import re


def open_tab(page, title: str) -> None:
    page.get_by_role("tab", name=title).click()


def choose(page, elem_id: str, option: str) -> None:
    """Pick an option of a Gradio dropdown."""
    page.locator(f"#{elem_id} input").first.click()
    # A selected option's accessible name carries a check mark before the text.
    page.get_by_role("option", name=re.compile(rf"(^|\s){re.escape(option)}$")).first.click()
