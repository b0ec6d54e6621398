"""bench/test_time.py reads pytest's JUnit file: the suite's wall time, its counts and its slowest items."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.test_time import read_items, summary

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="312.5">
<testcase classname="tests.backends.test_vllm_backend" name="test_engine" time="120.25"><properties><property name="cpu_s" value="150.5"/><property name="started_at" value="1000.0"/><property name="worker" value="gw1"/></properties></testcase>
<testcase classname="tests.test_sweep" name="test_grid" time="0.5"><properties><property name="started_at" value="1010.0"/><property name="worker" value="gw0"/></properties></testcase>
<testcase classname="tests.test_sweep" name="test_rerun" time="30.0"><failure message="assert 1 == 2"/></testcase>
<testcase classname="tests.ui.test_app" name="test_runs[chromium]" time="2.0"><skipped message="no chromium"/></testcase>
</testsuite></testsuites>
"""


def test_items_are_read_with_their_outcome_and_path(tmp_path):
    path = tmp_path / "times.xml"
    path.write_text(JUNIT)
    items, wall = read_items(path)
    assert wall == 312.5
    assert [(i.nodeid, i.seconds, i.outcome, i.cpu, i.started_at, i.worker) for i in items] == [
        ("tests/backends/test_vllm_backend.py::test_engine", 120.25, "passed", 150.5, 1000.0, "gw1"),
        ("tests/test_sweep.py::test_grid", 0.5, "passed", 0.0, 1010.0, "gw0"),
        ("tests/test_sweep.py::test_rerun", 30.0, "failed", 0.0, None, ""),
        ("tests/ui/test_app.py::test_runs[chromium]", 2.0, "skipped", 0.0, None, ""),
    ]


def test_summary_gives_the_total_the_budget_and_the_slowest_first(tmp_path):
    path = tmp_path / "times.xml"
    path.write_text(JUNIT)
    lines = summary(*read_items(path), top=2, budget=300)
    assert lines[0] == "test time: 312 s wall for 4 items (2 passed, 1 failed, 1 skipped); items add up to 153 s, 150 CPU s"
    assert lines[1] == "budget: 300 s, OVER (104%)"
    # Each worker's busy time and when its last item ended, counted from the first item's start.
    assert lines[2:5] == ["workers (busy s, done at s):", "  gw0:       0 s busy, done at    10 s (1 items)",
                          "  gw1:     120 s busy, done at   120 s (1 items)"]
    assert lines[6:] == ["    120.2 s   150.5 CPU s  tests/backends/test_vllm_backend.py::test_engine",
                         "     30.0 s     0.0 CPU s  tests/test_sweep.py::test_rerun  [failed]"]


def test_a_missing_file_is_a_one_line_error(tmp_path, repo_root):
    done = subprocess.run([sys.executable, "bench/test_time.py", str(tmp_path / "none.xml")], cwd=repo_root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_pytest_records_each_items_cpu_seconds(tmp_path, repo_root):
    """tests/conftest.py writes an item's CPU seconds, its subprocesses' included, as the JUnit property cpu_s."""
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_burn():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(3_000_000))'], check=True)\n")
    junit = tmp_path / "times.xml"
    # A plain pytest, as if not started by an xdist worker (whose variable it would inherit).
    outside_xdist = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(repo_root),
                           "-c", str(repo_root / "pyproject.toml"), "--confcutdir", str(repo_root / "tests"),
                           "-p", "tests.conftest", f"--junitxml={junit}", str(tmp_path / "test_burn.py")],
                          cwd=repo_root, capture_output=True, text=True, env=outside_xdist)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (item,), _ = read_items(junit)
    assert item.cpu > 0.1  # the child's work is counted, not only the worker's
    assert item.worker == "main" and abs(item.started_at - time.time()) < 600
