"""Helpers for tests that start the app's background jobs."""

from __future__ import annotations

from tests.waiting import PATIENCE_S, wait_until
from ui import jobs


def job_now(folder, job_id) -> jobs.Job:
    """The job as its state file says now."""
    return next(j for j in jobs.list_jobs(folder) if j.job_id == job_id)


def wait_until_ended(folder, job_id, timeout: float = PATIENCE_S) -> jobs.Job:
    """The job once it has left the active states; fails with its output's tail if it is still active at `timeout`."""
    return wait_until(lambda: (job := job_now(folder, job_id)).status not in jobs.ACTIVE and job,
                      f"job {job_id} to end", timeout, details=lambda: jobs.log_tail(job_now(folder, job_id))[-2000:])


def wait_until_running(folder, job_id, timeout: float = PATIENCE_S) -> jobs.Job:
    """The job once its runner has announced itself running (its signal handlers are then in place, so a cancel is
    recorded as one)."""
    return wait_until(lambda: (job := job_now(folder, job_id)).status == "running" and job,
                      f"job {job_id} to be running", timeout,
                      details=lambda: jobs.log_tail(job_now(folder, job_id))[-2000:])


HOLD_FOREVER = "import threading; threading.Event().wait()"
"""A job's command body that runs until it is stopped: a fixed sleep would end by itself on a machine slow enough to
reach the stop after it."""
