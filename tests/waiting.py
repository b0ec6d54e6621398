"""Waiting on a condition, the one way the tests wait.

A test waits for what it needs (a job that ended, a file that appeared, a page that shows a state), never for a fixed
time: a fixed time that an idle machine needs is missed by a busy one, where two cores serve four test runs. The
deadline is a safety net against a condition that never comes (a hang fails with what it waited for), not an
expectation of how fast the machine is, so it is generous.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PATIENCE_S = 600.0
"""Default deadline of a wait, in seconds: minutes, far beyond what an idle machine takes."""

PATIENCE_MS = int(PATIENCE_S * 1000)
"""The same deadline in milliseconds, for Playwright's expectations and waits."""


def wait_until(condition: Callable[[], T], what: str, timeout: float = PATIENCE_S, interval: float = 0.2,
               details: Callable[[], str] | None = None) -> T:
    """Poll `condition()` until it returns something true and return that; an OSError it raises counts as not yet.
    After `timeout` seconds fail with `what` (the condition in words) and, when given, `details()` (a log's tail)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            said = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"waited {timeout:.0f} s for {what}{said}")
        time.sleep(interval)
