"""The test suite's time budget: its total and its slowest items, read from pytest's JUnit XML.

    python bench/test_time.py .cache/test-times.xml [--top 10] [--budget 900]

`make test` writes the XML and runs this at its end, so every CI log shows where the suite's time goes. An
item's time is its setup, call and teardown together (pytest's `junit_duration_report = total`), so a test
that pays for a shared fixture shows that cost. Exits 0 whatever the figures: a budget is a number to watch,
not a test that fails on a busy machine.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


# JUnit's element for an item that did not pass -> pytest's word for it.
OUTCOMES = {"failure": "failed", "error": "error", "skipped": "skipped"}


@dataclass(frozen=True)
class Item:
    """One test item's outcome in the JUnit file."""

    nodeid: str
    """pytest's id of the item (path::name)."""
    seconds: float
    """setup + call + teardown time."""
    outcome: str
    """passed, failed, error or skipped."""
    cpu: float = 0.0
    """CPU seconds of the item's worker and the subprocesses it waited for (tests/conftest.py), setup to teardown."""
    started_at: float | None = None
    """When its setup began, in epoch seconds (tests/conftest.py); None in a file written without it."""
    worker: str = ""
    """The pytest-xdist worker that ran it ("gw0", ...; "main" without xdist)."""


def read_items(path: Path) -> tuple[list[Item], float]:
    """The items of a JUnit XML file and the suite's wall time as pytest recorded it."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    items = []
    for case in root.iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        # With `--dist loadgroup` pytest-xdist appends "@<group>" to each name; the group is not part of the test.
        name = case.get("name", "?").split("@")[0]
        nodeid = f"{module}.py::{name}" if module else name
        outcome = next((OUTCOMES[child.tag] for child in case if child.tag in OUTCOMES), "passed")
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        started = properties.get("started_at")
        items.append(Item(nodeid, float(case.get("time") or 0.0), outcome, float(properties.get("cpu_s", 0.0)),
                          float(started) if started else None, properties.get("worker", "")))
    wall = sum(float(s.get("time") or 0.0) for s in suites)
    return items, wall


def summary(items: list[Item], wall: float, top: int, budget: float | None) -> list[str]:
    counts = {o: sum(i.outcome == o for i in items) for o in ("passed", "failed", "error", "skipped")}
    lines = [f"test time: {wall:.0f} s wall for {len(items)} items ("
             + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"); items add up to {sum(i.seconds for i in items):.0f} s, "
             f"{sum(i.cpu for i in items):.0f} CPU s"]
    if budget is not None:
        verdict = "within" if wall <= budget else "OVER"
        lines.append(f"budget: {budget:.0f} s, {verdict} ({wall / budget:.0%})")
    lines.extend(worker_lines(items))
    lines.append(f"slowest {min(top, len(items))} items (wall, CPU):")
    for item in sorted(items, key=lambda i: i.seconds, reverse=True)[:top]:
        lines.append(f"  {item.seconds:7.1f} s {item.cpu:7.1f} CPU s  {item.nodeid}"
                     + ("" if item.outcome == "passed" else f"  [{item.outcome}]"))
    return lines


def worker_lines(items: list[Item]) -> list[str]:
    """Each worker's busy seconds and when it ran out of work, from the first item's start: a worker that finishes
    long before the last one shows work that could be spread better."""
    timed = [i for i in items if i.started_at is not None and i.worker]
    if not timed:
        return []
    start = min(i.started_at for i in timed)
    lines = ["workers (busy s, done at s):"]
    for worker in sorted({i.worker for i in timed}, key=lambda w: (len(w), w)):
        own = [i for i in timed if i.worker == worker]
        done = max(i.started_at + i.seconds for i in own) - start
        lines.append(f"  {worker}: {sum(i.seconds for i in own):7.0f} s busy, done at {done:5.0f} s ({len(own)} items)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="the XML file pytest wrote with --junitxml")
    parser.add_argument("--top", type=int, default=10, help="how many of the slowest items to list")
    parser.add_argument("--budget", type=float, default=None, help="the suite's wall-time budget in seconds")
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"error: {args.junit}: no JUnit file (did pytest run with --junitxml?)", file=sys.stderr)
        return 2
    items, wall = read_items(args.junit)
    print("\n".join(summary(items, wall, args.top, args.budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
