"""Helpers for tests that start the app's background jobs."""

from __future__ import annotations

import time

from ui import jobs


def wait_until_ended(folder, job_id, timeout=60.0) -> jobs.Job:
    """The job once it has left the active states; fails with its output's tail if it is still active at `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = next(j for j in jobs.list_jobs(folder) if j.job_id == job_id)
        if job.status not in jobs.ACTIVE:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status}:\n{jobs.log_tail(job)[-2000:]}")
