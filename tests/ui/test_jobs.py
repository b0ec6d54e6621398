"""Background jobs: detached runner processes, recorded exit status, the concurrency limit, cancelling."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from job_helpers import HOLD_FOREVER, wait_until_ended, wait_until_running

from tests.waiting import wait_until
from ui import jobs

REPO_ROOT = Path(__file__).resolve().parents[2]


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
                          command=[sys.executable, "-c", HOLD_FOREVER])
    with pytest.raises(jobs.JobLimitReached):
        jobs.start_job(tmp_path, study="infilling", sweep="second", total_cells=1, cwd=REPO_ROOT,
                       command=[sys.executable, "-c", "pass"])
    # Wait for the runner to record itself, then stop it.
    wait_until_running(tmp_path, slow.job_id)
    jobs.cancel_job(slow)
    ended = wait_until_ended(tmp_path, slow.job_id)
    assert ended.status == "cancelled"
    assert not jobs.active_jobs(tmp_path)


def test_progress_bar_carriage_returns_collapse_in_the_log_tail(tmp_path):
    job = jobs.start_job(tmp_path, study="infilling", sweep="bars", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", "import sys; sys.stdout.write('cells 0/2\\rcells 1/2\\rcells 2/2\\ndone\\n')"])
    ended = wait_until_ended(tmp_path, job.job_id)
    assert jobs.log_tail(ended).splitlines() == ["cells 2/2", "done"]


def test_a_refused_launch_leaves_no_config_behind(tmp_path):
    """Bug 5: a launch refused by the job limit used to leave its <id>.yaml in the jobs folder."""
    import gradio as gr

    from ui.common import AppSettings
    from ui.launch import FROM_FORM, launch

    app = AppSettings(jobs_dir=tmp_path / "jobs", reports_dir=tmp_path / "reports", max_jobs=1)
    busy = jobs.start_job(app.jobs_dir, study="infilling", sweep="busy", total_cells=1, cwd=REPO_ROOT,
                          command=[sys.executable, "-c", HOLD_FOREVER])
    wait_until_running(app.jobs_dir, busy.job_id)
    try:
        with pytest.raises(gr.Error, match="limit is 1"):
            launch(app, FROM_FORM, "", "refused", "infilling", ["smollm2"], ["L2"], "data/infilling/sample.jsonl", 2,
                   "0", "none", 16, 0.3)
        assert sorted(p.suffix for p in app.jobs_dir.iterdir()) == [".json", ".log"]  # the busy job's files only
    finally:
        jobs.cancel_job(busy)
        wait_until_ended(app.jobs_dir, busy.job_id)


@pytest.mark.slow
def test_a_stopped_sweep_ends_its_runs_killed_with_their_params(tmp_path, repo_root):
    """Bug 4: stopping a job used to leave its MLflow cell run RUNNING forever, with no model/setting/condition."""
    from narrative_eval import tracking

    sweep = "stopped-sweep"
    command = [sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/quickstart.yaml",
               "--set", f"sweep={sweep}", "--set", "models=[smollm2]", "--set", "prompt_settings=[L0]",
               "--set", "judges=[]", "--set", "metrics.names=[chrf]", "--set", f"report_dir={tmp_path}/{{sweep}}",
               "--no-progress"]
    job = jobs.start_job(tmp_path / "jobs", study="infilling", sweep=sweep, total_cells=1, cwd=repo_root, command=command)
    wait_until_running(tmp_path / "jobs", job.job_id)
    wait_until(lambda: tracking.run_status_counts("infilling", sweep).get("RUNNING", 0) > 0,
               "the sweep's cell run to be RUNNING", details=lambda: jobs.log_tail(job))
    jobs.cancel_job(job)
    ended = wait_until_ended(tmp_path / "jobs", job.job_id)
    assert ended.status == "cancelled", jobs.log_tail(ended)
    runs = tracking.sweep_cell_runs("infilling", sweep, finished_only=False)
    assert list(runs["status"]) == ["KILLED"]
    assert runs["params.model_id"].iloc[0] == "smollm2" and runs["params.prompt_setting"].iloc[0] == "L0"
    parent = tracking.client().get_run(tracking.find_sweep_run("infilling", sweep))
    assert parent.info.status == "KILLED"
    # The tabs open on the newest sweep that has a finished cell, never on this dead one.
    assert sweep not in tracking.finished_sweeps("infilling")


def test_escape_codes_and_progress_bars_leave_the_log_tail(tmp_path):
    """The Launch tab's output box showed tqdm bars and '[A' cursor codes; only real output lines remain."""
    noisy = ("import sys; sys.stdout.write('\\x1b[32mWARNING\\x1b[0m cache moved\\n"
             "cells:  50%|#####     | 1/2 [00:03<00:03]\\x1b[A\\r\\n"
             "smollm2/L2: generate 100%|##########| 2/2 [00:01<00:00]\\n\\x1b[Acells: 1 finished\\n')")
    job = jobs.start_job(tmp_path, study="infilling", sweep="noisy", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", noisy])
    ended = wait_until_ended(tmp_path, job.job_id)
    assert jobs.log_tail(ended).splitlines() == ["WARNING cache moved", "cells: 1 finished"]


def test_the_launch_tab_refuses_what_the_command_line_refuses(tmp_path):
    """The form builds its config through the library, so a negative seed and a data file without instances are
    refused there too, before any job starts, with the same messages."""
    import gradio as gr

    from narrative_eval.data.instances import COLUMNS
    from ui.common import AppSettings
    from ui.launch import FROM_FORM, estimate, launch

    app = AppSettings(jobs_dir=tmp_path / "jobs", reports_dir=tmp_path / "reports", max_jobs=1)
    header_only = tmp_path / "header_only.csv"
    header_only.write_text(",".join(COLUMNS) + "\n")
    with pytest.raises(gr.Error, match=r"seeds: must be integers from 0 to 4294967294 .* got -1"):
        launch(app, FROM_FORM, "", "negative-seed", "infilling", ["smollm2"], ["L2"], "data/infilling/sample.jsonl", 2,
               "0, -1", "none", 16, 0.3)
    with pytest.raises(gr.Error, match=f"{header_only}: no instances: the file has its header and no rows"):
        estimate(app, FROM_FORM, "", "no-rows", "infilling", ["smollm2"], ["L2"], str(header_only), 2, "0", "none", 16,
                 0.3)
    assert jobs.list_jobs(app.jobs_dir) == [] and list(app.jobs_dir.iterdir()) == []


def test_the_log_tail_keeps_the_jobs_own_whole_lines(tmp_path):
    """The output box and 'last output' showed dependencies' warnings and began mid-word: the known warnings (as
    Python prints them, with their source line, and as their loggers print them) leave, and only whole lines stay."""
    script = tmp_path / "noisy.py"
    script.write_text(
        "import sys, warnings\n"
        "from narrative_eval.quiet import KNOWN_WARNINGS\n"
        "for number in range(200):\n"
        "    print(f'cell {number}: generated twelve fills and scored them against the gold text')\n"
        "known = KNOWN_WARNINGS[0]\n"
        "warnings.warn_explicit('The specified dataset source can be interpreted in multiple ways: LocalArtifact',\n"
        "                       known.category, '/venv/mlflow/data/dataset_source_registry.py', 146)\n"
        "print('WARNING torchao: Failed to load /venv/torchao/_C.so: undefined symbol', file=sys.stderr)\n"
        "print('WARNING narrative_eval.cells: cell smollm2/L2 retried once')\n"
        "print('cells: 6 finished, 0 already done (skipped), 0 failed; requests sent to engines: ' + 'x' * 300)\n")
    job = jobs.start_job(tmp_path, study="infilling", sweep="noisy", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, str(script)])
    ended = wait_until_ended(tmp_path, job.job_id)
    everything = Path(ended.log_path).read_text()
    assert "torchao" in everything and "UserWarning" in everything  # they were there
    tail = jobs.log_tail(ended, max_chars=1000)
    lines = tail.splitlines()
    assert "torchao" not in tail and "Warning" not in tail and "warnings.warn" not in tail, tail
    assert "WARNING narrative_eval.cells: cell smollm2/L2 retried once" in lines  # the job's own warning stays
    assert all(line.startswith(("cell ", "WARNING narrative_eval", "cells: ")) for line in lines), lines
    assert len(tail) <= 1000
    last = jobs.last_line(ended)
    assert last.startswith("cells: 6 finished") and last.endswith(" …") and len(last) <= 160


def test_a_stop_the_sweep_answers_with_its_own_exit_status_still_reads_as_stopped(tmp_path):
    """A sweep stopped after its cells (while it printed its tables) exits 130 as Ctrl-C does, not by the signal: the
    job read 'failed' although it was stopped."""
    code = ("import signal, sys, threading\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))\n"
            "print('ready', flush=True)\n"
            "threading.Event().wait()\n")
    job = jobs.start_job(tmp_path, study="infilling", sweep="stopped-late", total_cells=1, cwd=REPO_ROOT,
                         command=[sys.executable, "-c", code])
    wait_until_running(tmp_path, job.job_id)
    wait_until(lambda: "ready" in jobs.log_tail(job), "the job's command to set its SIGTERM handler")
    jobs.cancel_job(job)
    ended = wait_until_ended(tmp_path, job.job_id)
    assert (ended.status, ended.returncode) == ("cancelled", 130)


def test_a_traceback_in_a_jobs_output_is_one_error_line():
    """A launch whose 12 cells failed showed 12 raw tracebacks in the output box: each now reads as one `error:` line
    (what led to it, then its exception); the job's log file keeps the whole trace."""
    log = ["cells: 0 finished, 0 already done (skipped), 2 failed",
           "FAILED llama-3.1-8b/default/full: Traceback (most recent call last):",
           '  File "/app/platform/narrative_eval/cells.py", line 90, in run_cell_tracked',
           "    result: CellResult = study.run_cell(cell, runtime)",
           "                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
           "OSError: meta-llama/Llama-3.1-8B-Instruct is not a local folder",
           "",
           "Traceback (most recent call last):",
           '  File "x.py", line 1, in <module>',
           "KeyError: 'a'",
           "",
           "During handling of the above exception, another exception occurred:",
           "",
           "Traceback (most recent call last):",
           '  File "x.py", line 3, in <module>',
           "ValueError: b",
           "MLflow: sqlite:///mlflow.db"]
    assert jobs.own_lines(log)[::-1] == [
        "cells: 0 finished, 0 already done (skipped), 2 failed",
        "error: FAILED llama-3.1-8b/default/full: OSError: meta-llama/Llama-3.1-8B-Instruct is not a local folder",
        "error: KeyError: 'a'", "error: ValueError: b", "MLflow: sqlite:///mlflow.db"]


def test_launch_checks_a_typed_config_like_the_dry_run_and_that_its_models_can_run_here(tmp_path, monkeypatch):
    """Any config path is taken (a typed one was ignored and the first of the list started instead), checked before it
    starts, and refused, naming them, when its models or judges cannot run here; the form's numbers and name are
    checked with messages for the form (none of them starts a job or leaves a file)."""
    from ui.common import AppSettings, FormError
    from ui.launch import FROM_CONFIG, FROM_FORM, estimate, launch

    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    app = AppSettings(jobs_dir=tmp_path / "jobs", reports_dir=tmp_path / "reports", max_jobs=1)
    form = ("infilling", ["smollm2"], ["L2"], "data/infilling/sample.jsonl")
    with pytest.raises(FormError) as refused:
        launch(app, FROM_CONFIG, "experiments/configs/incremental.yaml", "gpu-grid", *form, 2, "0", "none", 16, 0.3)
    assert "model llama-3.1-8b cannot run here: it needs a download" in refused.value.message
    assert "judge claude-sonnet cannot run here: it needs ANTHROPIC_API_KEY" in refused.value.message
    with pytest.raises(FormError, match="No config file at examples/nowhere.yaml"):
        launch(app, FROM_CONFIG, "examples/nowhere.yaml", "nowhere", *form, 2, "0", "none", 16, 0.3)
    for arguments, message in (((-5, 16), r"Limit: a whole number 0 or more, got -5"),
                               ((2, 99_999_999), r"Max new tokens: a whole number from 8 to 2,048, got 99,999,999")):
        with pytest.raises(FormError, match=message):
            launch(app, FROM_FORM, "", "numbers", *form, arguments[0], "0", "none", arguments[1], 0.3)
    with pytest.raises(FormError, match=r"The sweep name '../platform' cannot be used: .* no '/'"):
        launch(app, FROM_FORM, "", "../platform", *form, 2, "0", "none", 16, 0.3)
    assert jobs.list_jobs(app.jobs_dir) == []
    whole = estimate(app, FROM_FORM, "", "huge", *form, 1e12, "0", "none", 16, 0.3)
    assert "The limit 1,000,000,000,000 is not below the data's size: the whole data file runs" in whole, whole
    assert "not below" not in estimate(app, FROM_FORM, "", "small", *form, 2, "0", "none", 16, 0.3)
    checked = estimate(app, FROM_CONFIG, "examples/continuation/continuation.yaml", "typed", *form, 1, "0", "none", 16,
                       0.3)
    assert checked.startswith("**Estimate:** 2 cells"), checked
    # The grid built in the form is of the study picked: the continuation plugin's own prompt settings.
    continued = estimate(app, FROM_FORM, "", "continued", "continuation", ["smollm2"], ["plain", "guided"],
                         "data/infilling/sample.jsonl", 1, "0", "none", 16, 0.3)
    assert continued.startswith("**Estimate:** 2 cells"), continued
    with pytest.raises(FormError, match="'L2' is not a prompt setting of the continuation study"):
        estimate(app, FROM_FORM, "", "continued", "continuation", ["smollm2"], ["L2"], "data/infilling/sample.jsonl", 1,
                 "0", "none", 16, 0.3)
