"""Where a launched sweep stands in the Launch tab's words: the stages its progress file names, with their counts, a bar
below 100% until the job has finished, and what a stop did."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.sweep import AFTER_CELLS, after_cell_steps, expand_grid, progress_plan
from narrative_eval.study import load_study
from ui import job_progress, jobs

REPO = Path(__file__).resolve().parents[2]


def quickstart(sweep: str, *overrides: str):
    return load_config(REPO / "experiments" / "configs" / "quickstart.yaml", [f"sweep={sweep}", *overrides])


def job_at(tmp_path: Path, sweep: str, state: dict | None, status: str = "running", cells: int = 6) -> jobs.Job:
    """A job of the quickstart's plan whose sweep last wrote `state` to its progress file."""
    job = jobs.Job(job_id=f"job-{sweep}", study="infilling", sweep=sweep, command=[sys.executable], total_cells=cells,
                   log_path=str(tmp_path / f"job-{sweep}.log"), status=status)
    job.cell_stages, job.after_steps = progress_plan(quickstart(sweep))
    if state is not None:
        job.progress_path.write_text(json.dumps(state))
    return job


def stage(name: str, done: int, total: int) -> dict:
    return {"name": name, "done": done, "total": total}


def finish_cells(sweep: str, count: int) -> None:
    """`count` finished cell runs of the sweep in MLflow, as a sweep stopped after them leaves."""
    parent = tracking.start_sweep_run("infilling", sweep, {})
    for cell in expand_grid(quickstart(sweep, "judges=[]"))[:count]:
        tracking.end_run(tracking.start_cell_run("infilling", cell, parent), "FINISHED")
    tracking.end_open_runs("KILLED")


def test_the_plan_names_the_studys_stages_and_the_sweeps_steps():
    cell_stages, after = progress_plan(quickstart("plan"))
    assert cell_stages == ["generate", "score", "judge smollm2-judge"]
    assert after == ["control checks", "report", "save to MLflow"]  # the quickstart's judge gets control checks
    assert progress_plan(quickstart("plan", "judge_checks=false"))[1] == ["report", "save to MLflow"]
    incremental = load_study("incremental")
    assert after_cell_steps(incremental) == ["report", incremental.after_sweep_stage, "save to MLflow"]
    assert after_cell_steps(incremental, checks=True)[0] == "control checks"


def test_a_running_cell_shows_its_stages_with_counts_and_those_to_come(tmp_path):
    state = {"cells_done": 1, "cells_total": 6, "cell": "gemma3/L0", "phase": "cells",
             "stages": [stage("generate", 12, 12), stage("score", 2, 5)], "after": []}
    job = job_at(tmp_path, "running", state)
    fraction, text = job_progress.progress_of(job)
    assert text == "cell 2 of 6 (gemma3/L0) · score 2/5"
    assert 1 / 7 < fraction < 2 / 7
    html = job_progress.stages_html(job, state)
    for shown in ("✓ generate 12/12", "▸ score 2/5", "judge smollm2-judge", "report", "save to MLflow"):
        assert shown in html, html


def test_the_bar_stays_below_full_until_the_job_has_finished(tmp_path):
    after = {"cells_done": 6, "cells_total": 6, "cell": "gemma3/L4", "phase": AFTER_CELLS, "stages": [],
             "after": [stage("report", 1, 1), stage("save to MLflow", 1, 1)]}
    running = job_at(tmp_path, "reporting", after)
    fraction, text = job_progress.progress_of(running)
    assert fraction < 1.0 and text == "6/6 cells · save to MLflow 1/1"
    assert "✓ cells 6/6" in job_progress.stages_html(running, after)
    assert job_progress.progress_of(job_at(tmp_path, "reporting", after, status="finished"))[0] == 1.0


def test_a_stop_says_how_many_cells_are_kept(tmp_path):
    finish_cells("stopped-midway", 4)
    state = {"cells_done": 4, "cells_total": 6, "cell": "gemma3/L2", "phase": "cells",
             "stages": [stage("generate", 3, 12)], "after": []}
    job = job_at(tmp_path, "stopped-midway", state, status="cancelled")
    assert job_progress.outcome(job).startswith("stopped after 4 of 6 cells; the finished cells are kept")
    assert "exit status" not in job_progress.ended_message(job)
    assert job_progress.progress_of(job)[1] == "stopped after 4 of 6 cells"  # the jobs table's short form


def test_a_stop_while_the_report_was_written_says_the_sweep_had_finished(tmp_path):
    finish_cells("stopped-reporting", 6)
    state = {"cells_done": 6, "cells_total": 6, "cell": "gemma3/L4", "phase": AFTER_CELLS, "stages": [],
             "after": [stage("report", 0, 1)]}
    job = job_at(tmp_path, "stopped-reporting", state, status="cancelled")
    assert job_progress.outcome(job).startswith("the sweep had finished; its report was interrupted — rerun to write it")
    assert job_progress.progress_of(job)[1] == "stopped while writing its report"


def test_a_stop_before_any_cell_finished_says_nothing_was_kept(tmp_path):
    job = job_at(tmp_path, "stopped-at-once", None, status="cancelled")
    assert job_progress.outcome(job) == "stopped before any of its 6 cells finished; nothing was kept."


def test_a_stop_after_the_report_was_saved_says_nothing_is_missing(tmp_path):
    finish_cells("stopped-after-report", 6)
    state = {"cells_done": 6, "cells_total": 6, "cell": "gemma3/L4", "phase": AFTER_CELLS, "stages": [],
             "after": [stage("control checks", 20, 20), stage("report", 1, 1), stage("save to MLflow", 1, 1)]}
    job = job_at(tmp_path, "stopped-after-report", state, status="cancelled")
    assert job_progress.outcome(job) == "the sweep and its report had finished when the stop came: nothing is missing."


def test_a_failed_cell_is_counted_as_failed_never_as_done(tmp_path, monkeypatch):
    """A sweep whose cells all failed read 'cells 12/12' at 92% and then 'failed after 0 of 12 cells': the progress
    file, the stages, the bar, the jobs table and the last message now count a failed cell as failed."""
    from experiments import progress
    from ui.common import AppSettings
    from ui.launch import cells_column

    monkeypatch.setenv(progress.PROGRESS_ENV, str(tmp_path / "progress.json"))
    for name, value in (("cells_done", 0), ("cells_failed", []), ("stages", []), ("after", []), ("phase", "cells")):
        monkeypatch.setattr(progress._State, name, value)
    parent = tracking.start_sweep_run("infilling", "half-failed", {})
    cells = expand_grid(quickstart("half-failed", "judges=[]"))[:2]
    for cell in progress.plain_progress(cells, "cells", len(cells)):
        run_id = tracking.start_cell_run("infilling", cell, parent)
        tracking.end_run(run_id, "FAILED" if cell is cells[0] else "FINISHED")
    tracking.end_run(parent, "FAILED")  # not left open for a later test's end_open_runs in this process
    state = progress.read_progress(tmp_path / "progress.json")
    assert state["cells_done"] == 2 and state["cells_failed"] == [cells[0].run_name]

    running = job_at(tmp_path, "half-failed", state, cells=2)
    assert job_progress.progress_of(running)[1] == f"cell 2 of 2 · 1 failed ({cells[1].run_name})"
    assert f"✗ 1 failed: {cells[0].run_name}" in job_progress.stages_html(running, state)
    jobs.save(running)
    assert "✗ 1 of 2 cells failed" in job_progress.progress_html(AppSettings(jobs_dir=tmp_path))
    ended = job_at(tmp_path, "half-failed", state, status="failed", cells=2)
    ended.returncode = 1
    assert cells_column(ended) == "1/2 · 1 failed"
    assert job_progress.progress_of(ended)[1] == "failed: 1 of 2 cells finished, 1 failed"
    assert job_progress.outcome(ended).startswith("failed (exit status 1) after 1 of 2 cells")
    assert "1 cell failed" in job_progress.outcome(ended)


def test_the_control_checks_are_one_step_after_the_cells(tmp_path, monkeypatch):
    """The control checks were drawn as a stage of the last cell while the bar read 92%: they are a step after the
    cells, reported in one part per judge and rubric and shown as one stage whose counts add up."""
    from experiments import progress
    from narrative_eval.sweep import CHECKS_STEP, as_step

    monkeypatch.setenv(progress.PROGRESS_ENV, str(tmp_path / "progress.json"))
    for name, value in (("cells_done", 6), ("cells_failed", []), ("stages", []), ("after", []), ("phase", "cells")):
        monkeypatch.setattr(progress._State, name, value)
    checks = as_step(progress.plain_progress, CHECKS_STEP)
    list(checks([1, 2, 3], "controls: judge smollm2-judge (infilling_narrative)", 3))
    second = iter(checks([1, 2], "controls: judge other-judge (infilling_narrative)", 2))
    next(second)  # the second part under way: its start is written at once
    state = progress.read_progress(tmp_path / "progress.json")
    assert state["phase"] == AFTER_CELLS and state["after"] == [stage(CHECKS_STEP, 3, 5)]
    job = job_at(tmp_path, "checking", state)
    assert job_progress.progress_of(job)[1] == "6/6 cells · control checks 3/5"
    html = job_progress.stages_html(job, state)
    assert "✓ cells 6/6" in html and "▸ control checks 3/5" in html and "generate" not in html


def test_the_last_message_says_a_judge_failed_its_checks(tmp_path):
    """Launch's last line read "finished: 2 of 2 cells and its report" while only the raw output said the judge had
    failed its control checks: it now ends with the warning every tab gives, read from the sweep's tags."""
    from narrative_eval.reports.judge_checks import judge_warning
    from narrative_eval.stats.judge_checks import TAG_PREFIX
    from ui.common import AppSettings
    from ui.launch import announce

    finish_cells("judge-failed", 6)
    parent = tracking.find_sweep_run("infilling", "judge-failed")
    tracking.client().set_tag(parent, f"{TAG_PREFIX}smollm2-judge", "fail: mismatched_fill, degenerate_fill")
    job = job_at(tmp_path, "judge-failed", {"cells_done": 6, "cells_total": 6, "phase": AFTER_CELLS, "stages": [],
                                            "after": [stage("report", 1, 1)]}, status="finished")
    jobs.save(job)
    message, followed = announce(AppSettings(jobs_dir=tmp_path), job.job_id)
    assert followed is None and "finished: 6 of 6 cells and its report" in message
    assert message.endswith(f"**{judge_warning('smollm2-judge', ['mismatched_fill', 'degenerate_fill'])}**."), message
    job.status = "cancelled"  # stopped: its checks may not have run, so no word of them
    jobs.save(job)
    assert "failed checks" not in announce(AppSettings(jobs_dir=tmp_path), job.job_id)[0]


def test_the_output_box_draws_the_reports_tables_as_tables():
    from ui.launch import log_html

    shown = log_html("loading smollm2\n## Main results\n| model | AtAvg |\n|:---|---:|\n| smollm2 | 0.412 |\n"
                     "| a <b> | 1 |\nwritten to reports/x/")
    assert "<div class='log-title'>Main results</div>" in shown and "|:---" not in shown
    assert "<th>model</th><th>AtAvg</th>" in shown and "<td>smollm2</td><td>0.412</td>" in shown
    assert "<td>a &lt;b&gt;</td>" in shown  # model output is untrusted text
    assert shown.count("<pre class='log-lines'>") == 2 and "written to reports/x/" in shown
