"""Background jobs: detached runner processes, recorded exit status, the concurrency limit, cancelling."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ui import jobs

REPO_ROOT = Path(__file__).resolve().parents[2]


def wait_until_ended(folder, job_id, timeout=60.0) -> jobs.Job:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = next(j for j in jobs.list_jobs(folder) if j.job_id == job_id)
        if job.status not in jobs.ACTIVE:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status}")


def test_a_job_runs_detached_and_records_its_exit_status(tmp_path):
    job = jobs.start_job(tmp_path, study="infilling", sweep="s", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", "print('cells: 1 finished')"])
    ended = wait_until_ended(tmp_path, job.job_id)
    assert ended.status == "finished" and ended.returncode == 0
    assert ended.started_at is not None and ended.finished_at >= ended.started_at
    assert "cells: 1 finished" in jobs.log_tail(ended)


def test_a_failing_command_is_marked_failed(tmp_path):
    job = jobs.start_job(tmp_path, study="infilling", sweep="s", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", "raise SystemExit(3)"])
    ended = wait_until_ended(tmp_path, job.job_id)
    assert ended.status == "failed" and ended.returncode == 3


def test_one_sweep_at_a_time_and_cancel(tmp_path):
    slow = jobs.start_job(tmp_path, study="infilling", sweep="slow", total_cells=1, cwd=REPO_ROOT,
                          command=[sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(jobs.JobLimitReached):
        jobs.start_job(tmp_path, study="infilling", sweep="second", total_cells=1, cwd=REPO_ROOT,
                       command=[sys.executable, "-c", "pass"])
    # Wait for the runner to record itself, then stop it.
    deadline = time.time() + 20
    while next(j for j in jobs.list_jobs(tmp_path) if j.job_id == slow.job_id).status != "running":
        assert time.time() < deadline
        time.sleep(0.1)
    jobs.cancel_job(slow)
    ended = wait_until_ended(tmp_path, slow.job_id, timeout=30)
    assert ended.status == "cancelled"
    assert not jobs.active_jobs(tmp_path)


def test_progress_bar_carriage_returns_collapse_in_the_log_tail(tmp_path):
    job = jobs.start_job(tmp_path, study="infilling", sweep="bars", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", "import sys; sys.stdout.write('cells 0/2\\rcells 1/2\\rcells 2/2\\ndone\\n')"])
    ended = wait_until_ended(tmp_path, job.job_id)
    assert jobs.log_tail(ended).splitlines() == ["cells 2/2", "done"]
