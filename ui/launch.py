"""Launch tab: start a sweep from a config file or from a small grid built in the form, as a background job."""

from __future__ import annotations

import re
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
import yaml

from narrative_eval import tracking
from narrative_eval.config import load_config, resolve_judge, resolve_model
from narrative_eval.errors import UserError
from narrative_eval.studies import infilling
from narrative_eval.sweep import describe_grid, estimate_lines, progress_plan
from ui import job_progress, jobs
from ui.common import AppSettings, config_files, data_files, esc, model_catalog, texts, user_error
from ui.live import prompt_settings

FROM_CONFIG = "a config file"
FROM_FORM = "a grid built here"
NO_JUDGE = "none"
SWEEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in re.split(r"[,\s]+", (text or "0").strip()) if part]
    except ValueError:
        raise user_error("Seeds are whole numbers separated by commas, e.g. 0, 1, 2.") from None
    return seeds or [0]


def grid_config(app: AppSettings, sweep: str, models: list[str], levels: list[str], data: str, limit: int | None,
                seeds: list[int], judge: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    """A self-contained sweep config: catalog names resolved to full specs, so it runs from any folder."""
    catalog = model_catalog(app)
    if not models:
        raise user_error("Pick at least one model.")
    if not levels:
        raise user_error("Pick at least one prompt level or paradigm.")
    config: dict[str, Any] = {
        "study": infilling.NAME,  # the form asks for prompt levels and paradigms: an infilling sweep
        "sweep": sweep,
        "description": "Launched from the app.",
        "data": data,
        "models": [resolve_model(name, catalog) for name in models],
        "prompt_settings": list(levels),
        "seeds": seeds,
        "generation": {"temperature": float(temperature), "max_new_tokens": int(max_tokens)},
        "report_dir": str(app.reports_dir / "{sweep}"),
    }
    if limit:
        config["limit"] = int(limit)
    if judge and judge != NO_JUDGE:
        config["judges"] = [resolve_judge(judge_entry(judge, catalog), catalog)]
    return config


def judge_entry(name: str, catalog: dict[str, Any]) -> str | dict[str, Any]:
    """A judge picked in the form: the catalog's judge of that name, or a catalog model judging greedily."""
    if name in catalog["judges"]:
        return name
    return {"id": f"{name}-judge", "model": name, "temperature": 0.0, "seed": 0}


def judge_names(catalog: dict[str, Any]) -> list[str]:
    """The judges the form offers: the catalog's judges, then every model none of them judges with."""
    judging = {str(entry.get("model", name)) for name, entry in catalog["judges"].items() if isinstance(entry, dict)}
    return [*catalog["judges"], *(name for name in catalog["models"] if name not in judging)]


def _check_room(app: AppSettings) -> None:
    """Refuse before anything is written when the job limit is reached."""
    running = jobs.active_jobs(app.jobs_dir)
    if len(running) >= app.max_jobs:
        names = ", ".join(f"{j.sweep} ({j.job_id})" for j in running)
        raise user_error(f"{len(running)} sweep(s) already running ({names}); the limit is {app.max_jobs}.")


def _job_config(app: AppSettings, job_id: str, mode: str, config_file: str, sweep: str, limit_value: int | None,
                form: tuple, jobs_dir: Path | None = None) -> tuple[Any, str, list[str], Path | None]:
    """(config, its path, the command, the file written for this job or None); the written file is removed on error.
    A grid built in the form is written into `jobs_dir` (default: the app's jobs folder)."""

    # No terminal bars in the log: the sweep reports its progress to the job's progress file instead.
    command = [sys.executable, "-m", "experiments.sweep", "--no-progress"]
    if mode == FROM_CONFIG:
        if not config_file:
            raise user_error("Pick a config file.")
        overrides = [f"sweep={sweep}", f"report_dir={app.reports_dir / '{sweep}'}"]
        config = load_config(app.repo / config_file, overrides, limit=limit_value)
        command += ["--config", config_file] + [part for o in overrides for part in ("--set", o)]
        if limit_value:
            command += ["--limit", str(limit_value)]
        return config, str(app.repo / config_file), command, None
    models, levels, data, seeds_text, judge, max_tokens, temperature = form
    raw = grid_config(app, sweep, models, levels, data, limit_value, _seeds(seeds_text), judge, int(max_tokens),
                      float(temperature))
    path = (jobs_dir or app.jobs_dir) / f"{job_id}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        config = load_config(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return config, str(path), command + ["--config", str(path)], path


def estimate(app: AppSettings, mode: str, config_file: str, sweep: str, models: list[str], levels: list[str], data: str,
             limit: float | None, seeds_text: str, judge: str, max_tokens: float, temperature: float) -> str:
    """What the launch would run and cost, before anything starts: the dry run's counts and its cost estimates."""


    sweep = (sweep or "").strip() or "estimate"
    form = (models, levels, data, seeds_text, judge, max_tokens, temperature)
    with tempfile.TemporaryDirectory() as folder:
        try:
            config, _, _, _ = _job_config(app, "estimate", mode, config_file, sweep, int(limit) if limit else None, form,
                                          jobs_dir=Path(folder))
            grid = describe_grid(config)
        except UserError as error:
            raise user_error("The sweep config is not valid: " + "; ".join(error.problems)) from None
    lines = [f"{len(grid['cells'])} cell(s)", *estimate_lines(config, grid)]
    return "**Estimate:** " + "; ".join(lines) + "."


def launch(app: AppSettings, mode: str, config_file: str, sweep: str, models: list[str], levels: list[str], data: str,
           limit: float | None, seeds_text: str, judge: str, max_tokens: float, temperature: float) -> jobs.Job:
    """Validate the form, write the job's config, and start it in the background (nothing is left behind when refused)."""

    sweep = (sweep or "").strip()
    if not SWEEP_NAME.match(sweep):
        raise user_error("Give the sweep a name: letters, digits, '.', '_' or '-' (e.g. my-first-sweep).")
    limit_value = int(limit) if limit else None
    job_id = time.strftime("%Y%m%d-%H%M%S-") + sweep[:24]
    app.jobs_dir.mkdir(parents=True, exist_ok=True)
    _check_room(app)
    form = (models, levels, data, seeds_text, judge, max_tokens, temperature)
    try:
        config, config_path, command, written = _job_config(app, job_id, mode, config_file, sweep, limit_value, form)
    except UserError as error:  # a config the platform rejects is reported, not launched
        raise user_error("The sweep config is not valid: " + "; ".join(error.problems)) from None
    cells = len(config.models) * len(config.prompt_settings) * len(config.conditions)
    try:
        return jobs.start_job(app.jobs_dir, study=config.study, sweep=config.sweep, command=command, total_cells=cells,
                              config_path=config_path, cwd=app.repo, max_jobs=app.max_jobs, job_id=job_id,
                              stages=progress_plan(config))
    except jobs.JobLimitReached as error:  # another launch won the last slot in the meantime
        if written is not None:
            written.unlink(missing_ok=True)
        raise user_error(str(error)) from None


def name_note(sweep: str | None) -> str:
    """Said under the name box: a name that exists resumes that sweep."""
    name = (sweep or "").strip()
    if not name:
        return ""
    try:
        existing = tracking.all_sweeps()
    except Exception:
        return ""
    if name in existing:
        return (f"⚠ A sweep named **{esc(name)}** already exists: launching resumes it (its finished cells are skipped, "
                "new cells join it). Pick another name for a separate sweep.")
    return ""


JOB_COLUMNS = ["job", "sweep", "status", "progress", "cells", "started", "elapsed", "last output"]


def jobs_table(app: AppSettings) -> pd.DataFrame:
    rows = []
    for job in jobs.list_jobs(app.jobs_dir)[:20]:
        end = job.finished_at or time.time()
        elapsed = f"{end - job.started_at:.0f} s" if job.started_at else ""
        status = "stopped" if job.status == "cancelled" else job.status
        rows.append({"job": job.job_id, "sweep": job.sweep, "status": status,
                     "progress": job_progress.progress_of(job)[1],
                     "cells": f"{job_progress.cells_done(job)}/{job.total_cells}",
                     "started": job_progress.clock(job.started_at), "elapsed": elapsed,
                     "last output": jobs.last_line(job)})
    return pd.DataFrame(rows, columns=JOB_COLUMNS)


def announce(app: AppSettings, job_id: str | None) -> tuple[Any, str | None]:
    """(the message, the job still followed): what the followed job did once it ended, else no change."""
    if not job_id:
        return gr.skip(), None
    job = next((j for j in jobs.list_jobs(app.jobs_dir) if j.job_id == job_id), None)
    if job is not None and job.status in jobs.ACTIVE:
        return gr.skip(), job_id
    return job_progress.ended_message(job), None


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["launch"])
    catalog = model_catalog(app)
    models_ = list(catalog["models"])
    files = data_files(app)
    configs = config_files(app)

    with gr.Row():
        mode = gr.Radio([FROM_FORM, FROM_CONFIG], value=FROM_FORM, label="Launch from", elem_id="launch-mode")
        sweep = gr.Textbox("", label="Sweep name", placeholder="e.g. my-sweep", elem_id="launch-sweep")
    with gr.Group(visible=False) as config_group:
        config_file = gr.Dropdown(configs, value=configs[0] if configs else None, label="Config file")
    with gr.Group(visible=True) as form_group:
        with gr.Row():
            models = gr.Dropdown(models_, value=models_[:1], multiselect=True, label="Models", elem_id="launch-models")
            levels = gr.Dropdown(prompt_settings(), value=["L2"], multiselect=True, label="Levels / paradigms",
                                 elem_id="launch-levels")
            judge = gr.Dropdown([NO_JUDGE, *judge_names(catalog)], value=NO_JUDGE, label="Judge",
                                elem_id="launch-judge")
        with gr.Row():
            data = gr.Dropdown(files, value=files[0] if files else None, label="Data", elem_id="launch-data")
            seeds = gr.Textbox("0", label="Seeds", elem_id="launch-seeds")
            max_tokens = gr.Number(96, precision=0, minimum=8, maximum=2048, label="Max new tokens",
                                   elem_id="launch-max-tokens")
            temperature = gr.Number(0.3, minimum=0.0, maximum=2.0, label="Temperature")
    limit = gr.Number(4, precision=0, minimum=0, label="Limit (instances; 0 = all)", elem_id="launch-limit")
    note = gr.Markdown(elem_id="launch-name-note")
    with gr.Row():
        start = gr.Button("Launch", variant="primary", elem_id="launch-go")
        estimate_button = gr.Button("Estimate cost", scale=0, elem_id="launch-estimate")
    estimate_text = gr.Markdown(elem_id="launch-estimate-text")
    message = gr.Markdown(elem_id="launch-message")
    progress_bars = gr.HTML(job_progress.progress_html(app), elem_id="launch-progress")
    table = gr.Dataframe(jobs_table(app), interactive=False, wrap=True, label="Jobs", elem_id="jobs-table")
    with gr.Row():
        cancel_id = gr.Dropdown([], label="Job to stop", allow_custom_value=True, scale=3, elem_id="launch-cancel-id")
        cancel = gr.Button("Stop job", variant="stop", scale=0, elem_id="launch-cancel")
    log = gr.Textbox(label="Output of the latest job", lines=8, max_lines=8, interactive=False, elem_id="launch-log",
                     placeholder=texts()["job_log_empty"])
    timer = gr.Timer(2.0)
    job_state = gr.State(None)

    mode.change(lambda m: (gr.Group(visible=m == FROM_CONFIG), gr.Group(visible=m == FROM_FORM)), [mode],
                [config_group, form_group])

    def on_launch(*values):
        resumed = bool(name_note(values[2]))
        job = launch(app, *values)
        text = (f"Started **{esc(job.sweep)}** as job `{job.job_id}` ({job.total_cells} cell(s)). "
                "It keeps running if you close this page; its runs appear under **Runs**.")
        if resumed:
            text += " It resumes the existing sweep of that name."
        return text, job.job_id, jobs_table(app)

    def on_tick(followed: str | None):
        listed = jobs.list_jobs(app.jobs_dir)
        active = [j.job_id for j in listed if j.status in jobs.ACTIVE]
        tail = jobs.log_tail(listed[0]) if listed else ""
        return (jobs_table(app), gr.Dropdown(choices=active), tail, job_progress.progress_html(app),
                *announce(app, followed))

    def on_cancel(job_id: str | None):
        job = next((j for j in jobs.list_jobs(app.jobs_dir) if j.job_id == job_id), None)
        if job is None:
            raise user_error("Pick a running job.")
        jobs.cancel_job(job)
        return f"Asked job `{job.job_id}` to stop; what it kept is said here once it has.", job.job_id

    inputs = [mode, config_file, sweep, models, levels, data, limit, seeds, judge, max_tokens, temperature]
    # No progress overlay on the message: the bars below show where the job stands, the message what it did.
    start.click(on_launch, inputs, [message, job_state, table], show_progress="hidden")
    estimate_button.click(partial(estimate, app), inputs, [estimate_text])
    timer.tick(on_tick, [job_state], [table, cancel_id, log, progress_bars, message, job_state], show_progress="hidden")
    sweep.change(name_note, [sweep], [note])
    cancel.click(on_cancel, [cancel_id], [message, job_state])
    return {"sweep": sweep, "start": start, "table": table}
