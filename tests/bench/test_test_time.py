"""bench/test_time.py reads pytest's JUnit file: the suite's wall time, its counts and its slowest items."""

from __future__ import annotations

import subprocess
import sys

from bench.test_time import read_items, summary

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="312.5">
<testcase classname="tests.backends.test_vllm_backend" name="test_engine" time="120.25"/>
<testcase classname="tests.test_sweep" name="test_grid" time="0.5"/>
<testcase classname="tests.test_sweep" name="test_rerun" time="30.0"><failure message="assert 1 == 2"/></testcase>
<testcase classname="tests.ui.test_app" name="test_runs[chromium]" time="2.0"><skipped message="no chromium"/></testcase>
</testsuite></testsuites>
"""


def test_items_are_read_with_their_outcome_and_path(tmp_path):
    path = tmp_path / "times.xml"
    path.write_text(JUNIT)
    items, wall = read_items(path)
    assert wall == 312.5
    assert [(i.nodeid, i.seconds, i.outcome) for i in items] == [
        ("tests/backends/test_vllm_backend.py::test_engine", 120.25, "passed"),
        ("tests/test_sweep.py::test_grid", 0.5, "passed"),
        ("tests/test_sweep.py::test_rerun", 30.0, "failed"),
        ("tests/ui/test_app.py::test_runs[chromium]", 2.0, "skipped"),
    ]


def test_summary_gives_the_total_the_budget_and_the_slowest_first(tmp_path):
    path = tmp_path / "times.xml"
    path.write_text(JUNIT)
    lines = summary(*read_items(path), top=2, budget=300)
    assert lines[0] == "test time: 312 s wall for 4 items (2 passed, 1 failed, 1 skipped); items add up to 153 s"
    assert lines[1] == "budget: 300 s, OVER (104%)"
    assert lines[3:] == ["    120.2 s  tests/backends/test_vllm_backend.py::test_engine",
                         "     30.0 s  tests/test_sweep.py::test_rerun  [failed]"]


def test_a_missing_file_is_a_one_line_error(tmp_path, repo_root):
    done = subprocess.run([sys.executable, "bench/test_time.py", str(tmp_path / "none.xml")], cwd=repo_root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
