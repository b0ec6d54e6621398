"""Background sweeps launched from the app.

A job is a sweep command run by a small runner process in its own session, so it survives a closed
browser tab and even a restarted app. Every job has three files in the jobs folder: its config
(<id>.yaml, for jobs built in the form), its log (<id>.log) and its state (<id>.json, rewritten
atomically by whoever changes it). The runner records the exit status when the sweep ends.

    python -m ui.jobs run JOB.json      # what the app starts; not meant to be typed
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from narrative_eval.quiet import known_output

ACTIVE = ("queued", "running")
"""States of a job that has not ended."""

PROGRESS_ENV = "NARRATIVE_EVAL_PROGRESS_FILE"
"""The sweep writes its progress (cells, requests of the current stage) to this file (experiments/progress.py)."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]")
"""Terminal escape codes (colours, tqdm's cursor moves such as ESC[A)."""
TQDM_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+")
"""A progress-bar line (shown as progress, not as output)."""
WARNING_SOURCE = re.compile(r"^\s+\S")
"""The indented source line Python prints under a warning."""
TRACEBACK = "Traceback (most recent call last):"
"""How Python starts a traceback; what follows, up to its exception line, stays in the job's log file only."""
CHAINED = re.compile(r"^(During handling of the above exception|The above exception was the direct cause)")


class JobLimitReached(RuntimeError):
    """Another sweep is still running and the concurrency limit is reached."""


@dataclass
class Job:
    """One launched sweep and where it stands."""

    job_id: str
    """Short unique id (also the stem of the job's files)."""
    study: str
    """The sweep's study (its MLflow experiment)."""
    sweep: str
    """The sweep name (the parent run's name)."""
    command: list[str]
    """The sweep command, as run from the repository root."""
    total_cells: int
    """Cells in the grid."""
    log_path: str
    """Where the sweep's output goes."""
    config_path: str = ""
    """The config YAML the command reads."""
    status: str = "queued"
    """queued, running, finished, failed, cancelled or lost (the runner vanished without a word)."""
    created_at: float = field(default_factory=time.time)
    """Unix time the job was created."""
    started_at: float | None = None
    """When the sweep process started."""
    finished_at: float | None = None
    """When it ended."""
    returncode: int | None = None
    """The sweep's exit status."""
    runner_pid: int | None = None
    """The runner process (leader of the job's process group)."""
    cell_stages: list[str] = field(default_factory=list)
    """The stages of each cell, in order, as the sweep's progress names them (empty: not known in advance)."""
    after_steps: list[str] = field(default_factory=list)
    """The sweep's steps after its cells (its report first), as its progress names them."""
    note: str = ""
    """What the launch said about the job beyond its grid (a limit that cuts nothing: the whole data file runs)."""

    @property
    def path(self) -> Path:
        return Path(self.log_path).with_suffix(".json")

    @property
    def progress_path(self) -> Path:
        return Path(self.log_path).with_suffix(".progress.json")

    def progress(self) -> dict[str, Any] | None:
        """What the sweep last wrote about its progress, or None before its first cell."""
        try:
            return json.loads(self.progress_path.read_text())
        except (OSError, ValueError):
            return None


def _write_atomic(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    os.replace(tmp, path)


def save(job: Job) -> None:
    _write_atomic(job.path, asdict(job))


def load(path: str | Path) -> Job:
    return Job(**json.loads(Path(path).read_text()))


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A finished child not yet reaped is a zombie: alive to kill(0), dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


def refresh(job: Job) -> Job:
    """Notice a runner that died without recording the end (machine reboot, killed by hand)."""
    if job.status in ACTIVE and job.runner_pid and not _alive(job.runner_pid):
        latest = load(job.path)
        if latest.status in ACTIVE:
            latest.status, latest.finished_at = "lost", time.time()
            save(latest)
        return latest
    return job


def list_jobs(jobs_dir: str | Path) -> list[Job]:
    """Every job in the folder, newest first."""
    folder = Path(jobs_dir)
    if not folder.exists():
        return []
    jobs = []
    for path in folder.glob("*.json"):
        try:
            jobs.append(refresh(load(path)))
        except (OSError, ValueError, TypeError):
            continue  # a half-written or foreign file is not a job
    return sorted(jobs, key=lambda j: -j.created_at)


def active_jobs(jobs_dir: str | Path) -> list[Job]:
    return [job for job in list_jobs(jobs_dir) if job.status in ACTIVE]


def start_job(jobs_dir: str | Path, *, study: str, sweep: str, command: list[str], total_cells: int,
              config_path: str = "", cwd: str | Path, max_jobs: int = 1, env: dict[str, str] | None = None,
              job_id: str | None = None, stages: tuple[list[str], list[str]] = ([], []), note: str = "") -> Job:
    """Start a sweep in the background (its own session, detached from the app and the browser)."""
    folder = Path(jobs_dir)
    folder.mkdir(parents=True, exist_ok=True)
    running = active_jobs(folder)
    if len(running) >= max_jobs:
        names = ", ".join(f"{j.sweep} ({j.job_id})" for j in running)
        raise JobLimitReached(f"{len(running)} sweep(s) already running ({names}); the limit is {max_jobs}.")
    job_id = job_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    job = Job(job_id=job_id, study=study, sweep=sweep, command=command, total_cells=total_cells,
              log_path=str((folder / f"{job_id}.log").resolve()), config_path=config_path,
              cell_stages=list(stages[0]), after_steps=list(stages[1]), note=note)
    save(job)
    environment = {**(env if env is not None else os.environ), PROGRESS_ENV: str(job.progress_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "ui.jobs", "run", str(job.path)],
        cwd=str(cwd), env=environment,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Reap the runner when it ends, so it never lingers as a zombie of the app.
    threading.Thread(target=process.wait, daemon=True).start()
    # The runner records its own pid and state; the caller's copy just learns the pid now.
    job.runner_pid = process.pid
    return job


def cancel_job(job: Job) -> None:
    """Stop a running job: its whole process group gets SIGTERM (the sweep marks its parent run KILLED)."""
    job = refresh(job)
    if job.status in ACTIVE and job.runner_pid and _alive(job.runner_pid):
        os.killpg(job.runner_pid, signal.SIGTERM)


def log_tail(job: Job, max_chars: int = 4000) -> str:
    """The end of a job's own output as whole lines: carriage returns resolved, escape codes, progress bars and the
    dependencies' known warnings dropped, no line cut at its start."""
    try:
        with open(job.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            start = max(0, size - max_chars * 4)
            handle.seek(start)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.split("\n")
    if start > 0:
        lines = lines[1:]  # the read began inside this line
    kept: list[str] = []
    room = max_chars
    for line in own_lines(lines):
        if len(line) > room:
            if not kept:  # one line longer than the box: its start, cut at a word's end
                kept.append(shortened(line, max_chars))
            break
        kept.append(line)
        room -= len(line) + 1
    return "\n".join(reversed(kept))


def shortened(line: str, max_chars: int) -> str:
    """A line cut at a word's end to fit `max_chars`, marked with an ellipsis."""
    if len(line) <= max_chars:
        return line
    cut = line[: max_chars - 2]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " …"


def own_lines(lines: list[str]) -> list[str]:
    """The job's own lines, newest first: what a terminal would show of each, without bars and known warnings, and
    each traceback as one `error:` line (what led to it before, its exception after; the whole trace stays in the
    job's log file)."""
    shown: list[str] = []
    dropped_warning = False
    traceback_of: str | None = None  # the words before a traceback's first line, while inside one
    for raw in lines:
        line = ANSI.sub("", raw.split("\r")[-1]).rstrip()
        if CHAINED.match(line):
            continue  # between two tracebacks of one error: each says its own exception
        if TRACEBACK in line:
            traceback_of = line[: line.index(TRACEBACK)].strip().rstrip(":")
            continue
        if traceback_of is not None:
            if not line.strip() or WARNING_SOURCE.match(line):
                continue  # a frame or its source
            shown.append(f"error: {traceback_of + ': ' if traceback_of else ''}{line.strip()}")
            traceback_of = None
            continue
        if dropped_warning and WARNING_SOURCE.match(line):
            continue  # the source line of a warning left out
        dropped_warning = known_output(line)
        if line.strip() and not dropped_warning and not TQDM_BAR.search(line):
            shown.append(line)
    return shown[::-1]


def last_line(job: Job, max_chars: int = 160) -> str:
    """The job's latest line of output, cut at a word's end when long."""
    lines = log_tail(job, 2000).splitlines()
    return shortened(lines[-1].strip(), max_chars) if lines else ""


# --------------------------------------------------------------------------- the runner


def run(job_path: str | Path) -> int:
    """Run a job's command to the end, recording start, pid and exit status in its state file."""
    job = load(job_path)
    with open(job.log_path, "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as error:  # the command could not start: record it, the job never ran
            log.write(f"cannot start {job.command[0]}: {error}\n".encode())
            job.status, job.finished_at = "failed", time.time()
            save(job)
            return 0

        asked_to_stop: list[int] = []

        def forward(signum, _frame):
            asked_to_stop.append(signum)
            # A signal to the whole group (cancel_job, Ctrl-C) has reached the child already: a second copy could
            # land while it unwinds from the first and kill it outright, losing the exit status it chose.
            try:
                elsewhere = os.getpgid(child.pid) != os.getpgid(0)
            except ProcessLookupError:  # the child has ended already
                return
            if elsewhere:
                child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        # Announced as running only now: a cancel that sees "running" must find the handler in place,
        # or the runner dies without recording the end and the job reads as lost.
        job.runner_pid = os.getpid()
        job.status, job.started_at = "running", time.time()
        save(job)
        returncode = child.wait()
    job = load(job_path)
    job.returncode = returncode
    job.finished_at = time.time()
    # A sweep stopped outside its cells (while it printed its tables) exits with a status of its own, not the signal's.
    job.status = "finished" if returncode == 0 else ("cancelled" if returncode < 0 or asked_to_stop else "failed")
    save(job)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "run":
        print(__doc__, file=sys.stderr)
        return 2
    return run(args[1])


if __name__ == "__main__":
    raise SystemExit(main())
