"""Where a launched sweep stands, in the Launch tab's words: its stages with their counts while it runs (read from
the progress file the sweep writes, experiments/progress.py), and what happened once it ended.

The stage names are the sweep's own (the study's progress descriptions and the sweep's steps after its cells); the
bar reaches 100% only when the job has finished."""

from __future__ import annotations

import time
from typing import Any

from narrative_eval import tracking
from narrative_eval.sweep import AFTER_CELLS
from ui import jobs
from ui.common import AppSettings, counted, esc, texts

RUNNING_CEILING = 0.99
"""The most a running job's bar shows: 100% means done."""

_ended_counts: dict[str, tuple[int, int]] = {}


def cell_counts(job: jobs.Job) -> tuple[int, int]:
    """(finished, failed) cell runs of the job's sweep, asked of MLflow while the job runs, remembered once it ended:
    a failed cell is never counted as done."""
    if job.job_id in _ended_counts:
        return _ended_counts[job.job_id]
    try:
        counts = tracking.run_status_counts(job.study, job.sweep)
    except Exception:
        return 0, 0
    done = (int(counts.get("FINISHED", 0)), int(counts.get("FAILED", 0)))
    if job.status not in jobs.ACTIVE:
        _ended_counts[job.job_id] = done
    return done


def cells_done(job: jobs.Job) -> int:
    """Finished cell runs of the job's sweep (failed ones are not done)."""
    return cell_counts(job)[0]


def failed_note(failed: int) -> str:
    """' · 3 failed' after a count of cells, or nothing when none failed."""
    return f" · {failed} failed" if failed else ""


def _stage_fraction(stage: dict[str, Any]) -> float:
    total = stage.get("total") or 0
    return min(int(stage.get("done") or 0) / total, 1.0) if total else 0.0


def _through(seen: list[dict[str, Any]], planned: list[str]) -> float:
    """How far through a planned list of stages the seen ones are (0 without a plan: nothing to weigh them by)."""
    if not seen or not planned:
        return 0.0
    return min((len(seen) - 1 + _stage_fraction(seen[-1])) / max(len(planned), len(seen)), 1.0)


def fraction(job: jobs.Job, state: dict[str, Any] | None) -> float:
    """The share of the job done: each cell one part and the steps after the cells one more; below 100% until
    the job has finished."""
    if job.status == "finished":
        return 1.0
    total = max(job.total_cells, 1)
    if state is None:
        return min(cells_done(job), total) / (total + 1)
    if state.get("phase") == AFTER_CELLS:
        part = total + _through(state.get("after") or [], job.after_steps or [s["name"] for s in state["after"]])
    else:
        part = min(int(state.get("cells_done") or 0), total) + _through(state.get("stages") or [], job.cell_stages)
    return min(part / (total + 1), RUNNING_CEILING)


def _count(stage: dict[str, Any]) -> str:
    return f"{stage['done']}/{stage['total']}" if stage.get("total") else str(stage.get("done") or 0)


def stages_text(job: jobs.Job, state: dict[str, Any] | None) -> str:
    """'cell 2 of 6 (smollm2/L2) · score 3/5' while cells run, 'after the cells · report 0/1' after them."""
    if state is None:
        return f"starting · {counted(job.total_cells, 'cell')}"
    failed = len(state.get("cells_failed") or [])
    if state.get("phase") == AFTER_CELLS:
        current = (state.get("after") or [{}])[-1]
        return (f"{job.total_cells - failed}/{job.total_cells} cells{failed_note(failed)} · "
                f"{current.get('name', '')} {_count(current)}").strip()
    cells = int(state.get("cells_done") or 0)
    text = f"cell {min(cells + 1, max(job.total_cells, 1))} of {job.total_cells}{failed_note(failed)}"
    if state.get("cell"):
        text += f" ({state['cell']})"
    current = (state.get("stages") or [None])[-1]
    return text + (f" · {current['name']} {_count(current)}" if current else "")


def _chip(name: str, state: str, count: str = "") -> str:
    mark = {"done": "✓ ", "current": "▸ ", "coming": "", "failed": "✗ "}[state]
    return f"<span class='stage {state}'>{mark}{esc(name)}{' ' + esc(count) if count else ''}</span>"


def _chips(seen: list[dict[str, Any]], planned: list[str], finished: bool) -> list[str]:
    """Each stage seen (done, or under way with its count), then the planned ones still to come."""
    chips = [_chip(s["name"], "done" if finished or i < len(seen) - 1 else "current", _count(s))
             for i, s in enumerate(seen)]
    return chips + [_chip(name, "coming") for name in planned[len(seen):]]


def stages_html(job: jobs.Job, state: dict[str, Any] | None) -> str:
    """The cells, the current cell's stages and the steps after the cells, each marked done, under way or to come."""
    state = state or {}
    after = state.get("phase") == AFTER_CELLS
    failed = state.get("cells_failed") or []
    cells = (job.total_cells if after else int(state.get("cells_done") or 0)) - len(failed)
    cell = f" (now {esc(state['cell'])})" if state.get("cell") and not after else ""
    line = [_chip(f"cells {cells}/{job.total_cells}{cell}", "done" if after and not failed else "current")]
    if failed:
        line[0] += " " + _chip(f"{len(failed)} failed: {', '.join(failed[:4])}{' …' if len(failed) > 4 else ''}",
                               "failed")
    if not after:
        line += _chips(state.get("stages") or [], job.cell_stages, False)
    line += _chips(state.get("after") or [], job.after_steps, False)
    return "<div class='job-stages'>" + " → ".join(line) + "</div>"


def progress_of(job: jobs.Job) -> tuple[float, str]:
    """(fraction done, where it stands in words): its stage while it runs, what happened once it ended."""
    state = job.progress()
    if job.status not in jobs.ACTIVE:
        return fraction(job, state), outcome(job, short=True)
    return fraction(job, state), stages_text(job, state)


def outcome(job: jobs.Job, short: bool = False) -> str:
    """What an ended job did, in words ('stopped after 4 of 6 cells; the finished cells are kept'); `short`: as
    the jobs table says it ('stopped after 4 of 6 cells')."""
    words = texts()["job_outcome_short" if short else "job_outcome"]
    state = job.progress() or {}
    (done, failed), cells = cell_counts(job), counted(job.total_cells, "cell")
    if job.status == "cancelled":
        text = words[_stopped_when(job, state, done)].format(done=done, total=cells)
    elif job.status == "failed":
        text = words["failed"].format(code=job.returncode, done=done, total=cells)
    else:
        text = words.get(job.status, job.status).format(done=done, total=cells)
    return text + (words["cells_failed"].format(failed=failed, cells=counted(failed, "cell")) if failed else "")


def _stopped_when(job: jobs.Job, state: dict[str, Any], done: int) -> str:
    """Which words a stop gets: during the cells (some kept or none), while the report was written, or after it."""
    after = state.get("after") or []
    if state.get("phase") == AFTER_CELLS:
        steps = job.after_steps or [step["name"] for step in after]
        written = len(after) >= len(steps) and all(_stage_fraction(step) >= 1.0 for step in after)
        return "stopped_after_report" if written else "report_interrupted"
    if int(state.get("cells_done") or 0) >= max(job.total_cells, 1):
        return "report_interrupted"
    return "stopped" if done else "stopped_early"


def progress_html(app: AppSettings) -> str:
    """A progress bar and the stages of every job still running (read from disk, so it survives a reload or an app
    restart)."""
    rows = []
    for job in jobs.list_jobs(app.jobs_dir)[:20]:
        if job.status not in jobs.ACTIVE:
            continue
        state = job.progress()
        share = fraction(job, state)
        failed = len((state or {}).get("cells_failed") or [])
        warning = f" <span class='stage failed'>✗ {failed} of {counted(job.total_cells, 'cell')} failed</span>" if failed else ""
        rows.append(f"<div class='job-progress'><b>{esc(job.sweep)}</b> <progress max='100' value='{100 * share:.0f}'>"
                    f"</progress> {100 * share:.0f}%{warning}</div>{stages_html(job, state)}")
    return "".join(rows) or "<div class='job-progress empty'>No sweep running.</div>"


def ended_message(job: jobs.Job | None) -> str:
    """The Launch tab's message once the job it started has ended."""
    if job is None:
        return "The job's state file is gone."
    return f"Job `{job.job_id}` (**{esc(job.sweep)}**): {outcome(job)}"


def clock(stamp: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp)) if stamp else ""
