"""Launch tab: start a sweep from a config file or from a small grid built in the form, as a background job; follow
it (stages, the jobs table, its output with the report's tables drawn as tables) and say what it did once it ended,
a judge that failed its control checks included."""

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
from narrative_eval.config import SweepConfig, load_config, resolve_judge, resolve_model
from narrative_eval.errors import UserError
from narrative_eval.reports.judge_checks import judge_warning, sweep_failing_judges
from narrative_eval.studies.live import prompt_setting_choices
from narrative_eval.study import experiment_of
from narrative_eval.sweep import cannot_run_here, checked_grid, describe_grid, estimate_lines, progress_plan
from ui import job_progress, jobs
from ui.common import (FORM, AppSettings, FieldErrors, FormError, config_files, counted, data_files, esc, model_catalog,
                       single_turn_studies, study_named, texts, user_error)

FROM_CONFIG = "a config file"
FROM_FORM = "a grid built here"
NO_JUDGE = "none"
SWEEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
MAX_TOKENS = (8, 2048)
"""The token budgets the form takes."""
TEMPERATURES = (0.0, 2.0)


def whole_number(value: float | None, what: str, field: str, low: int, high: int | None = None) -> int:
    """A form's number as an int within [low, high]; a FormError naming the field otherwise (Gradio's own minimum and
    maximum would log a traceback for each mistake)."""
    if value is None or value != value:  # empty, or NaN
        raise user_error(f"{what}: give a whole number.", field)
    if value != int(value) or value < low or (high is not None and value > high):
        span = f"from {low:,} to {high:,}" if high is not None else f"{low:,} or more"
        shown = f"{int(value):,}" if value == int(value) else f"{value:g}"
        raise user_error(f"{what}: a whole number {span}, got {shown}.", field)
    return int(value)


def checked_name(text: str | None) -> str:
    """The sweep name typed, or a FormError saying what is wrong with it."""
    sweep = (text or "").strip()
    if not sweep:
        raise user_error("Give the sweep a name: letters, digits, '.', '_' or '-' (e.g. my-first-sweep).", "sweep")
    if not SWEEP_NAME.match(sweep):
        raise user_error(f"The sweep name {esc(sweep)!r} cannot be used: a name is up to 80 letters, digits, '.', "
                         "'_' or '-', starting with a letter or digit (it names a folder of reports, so no '/').",
                         "sweep")
    return sweep


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in re.split(r"[,\s]+", (text or "0").strip()) if part]
    except ValueError:
        raise user_error("Seeds are whole numbers separated by commas, e.g. 0, 1, 2.", "seeds") from None
    return seeds or [0]


def grid_config(app: AppSettings, study: str, sweep: str, models: list[str], levels: list[str], data: str,
                limit: int | None, seeds: list[int], judge: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    """A self-contained sweep config: catalog names resolved to full specs, so it runs from any folder."""
    catalog = model_catalog(app)
    if not models:
        raise user_error("Pick at least one model.", "models")
    if not levels:
        raise user_error("Pick at least one prompt setting.", "levels")
    config: dict[str, Any] = {
        "study": study_named(study).name,
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
        raise user_error(f"{counted(len(running), 'sweep')} already running ({names}); the limit is {app.max_jobs}.")


def _job_config(app: AppSettings, job_id: str, mode: str, config_file: str, sweep: str, limit_value: int | None,
                form: tuple, jobs_dir: Path | None = None) -> tuple[Any, str, list[str], Path | None]:
    """(config, its path, the command, the file written for this job or None); the written file is removed on error.
    A grid built in the form is written into `jobs_dir` (default: the app's jobs folder)."""

    # No terminal bars in the log: the sweep reports its progress to the job's progress file instead.
    command = [sys.executable, "-m", "experiments.sweep", "--no-progress"]
    if mode == FROM_CONFIG:
        path = config_path(app, config_file)
        overrides = [f"sweep={sweep}", f"report_dir={app.reports_dir / '{sweep}'}"]
        config = load_config(path, overrides, limit=limit_value)
        command += ["--config", str(path)] + [part for o in overrides for part in ("--set", o)]
        if limit_value:
            command += ["--limit", str(limit_value)]
        return config, str(path), command, None
    study, models, levels, data, seeds_text, judge, max_tokens, temperature = form
    raw = grid_config(app, study, sweep, models, levels, data, limit_value, _seeds(seeds_text), judge,
                      int(max_tokens), float(temperature))
    path = (jobs_dir or app.jobs_dir) / f"{job_id}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        config = load_config(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return config, str(path), command + ["--config", str(path)], path


def config_path(app: AppSettings, typed: str | None) -> Path:
    """The config file picked or typed (relative to the repository, or absolute); a FormError when there is none."""
    text = (typed or "").strip()
    if not text:
        raise user_error("Pick a config file, or type the path of one (e.g. examples/continuation/continuation.yaml).",
                         "config")
    path = Path(text).expanduser()
    path = path if path.is_absolute() else app.repo / path
    if not path.is_file():
        raise user_error(f"No config file at {esc(text)} (a path relative to {esc(app.repo)}, or an absolute one).",
                         "config")
    return path


def checked(config: SweepConfig) -> dict[str, Any]:
    """The dry run's checks and counts (every input file, the data's rows), then whether every model and judge can
    run here (its key set, its weights on this machine, a server named); a UserError listing every problem."""
    grid = checked_grid(config)
    problems = cannot_run_here(config)
    if problems:
        raise UserError(problems)
    return grid


def limit_note(config: SweepConfig, grid: dict[str, Any]) -> str:
    """Said when the limit cuts nothing: the whole data file runs (a limit of 10^12 is not a mistake, but it should
    not pass silently)."""
    if not config.limit:
        return ""
    whole = describe_grid(config.model_copy(update={"limit": None}))
    if whole["generations"] < grid["generations"] or grid["generations"] < whole["generations"]:
        return ""
    return (f"The limit {config.limit:,} is not below the data's size: the whole data file runs "
            f"({counted(grid['generations'], 'generation')} in {counted(len(grid['cells']), 'cell')}).")


def _form_values(mode: str, limit: float | None, max_tokens: float, temperature: float) -> int | None:
    """The limit (None: all) once the form's numbers are checked."""
    limit_value = whole_number(limit if limit is not None else 0, "Limit", "limit", 0) or None
    if mode == FROM_FORM:
        whole_number(max_tokens, "Max new tokens", "max-tokens", *MAX_TOKENS)
        if temperature is None or not TEMPERATURES[0] <= temperature <= TEMPERATURES[1]:
            raise user_error(f"Temperature: a number from {TEMPERATURES[0]:g} to {TEMPERATURES[1]:g}.", "temperature")
    return limit_value


def invalid_config(mode: str, error: UserError) -> FormError:
    """A config the platform rejects: said under the config file's box, or under the form built from its fields."""
    return user_error("The sweep config is not valid: " + "; ".join(error.problems),
                      "config" if mode == FROM_CONFIG else FORM)


def estimate(app: AppSettings, mode: str, config_file: str, sweep: str, study: str, models: list[str],
             levels: list[str], data: str, limit: float | None, seeds_text: str, judge: str, max_tokens: float,
             temperature: float) -> str:
    """What the launch would run and cost, before anything starts: the dry run's counts and its cost estimates."""


    sweep = (sweep or "").strip() or "estimate"
    limit_value = _form_values(mode, limit, max_tokens, temperature)
    form = (study, models, levels, data, seeds_text, judge, max_tokens, temperature)
    with tempfile.TemporaryDirectory() as folder:
        try:
            config, _, _, _ = _job_config(app, "estimate", mode, config_file, sweep, limit_value, form,
                                          jobs_dir=Path(folder))
            grid = describe_grid(config)
            note = limit_note(config, grid)
        except UserError as error:
            raise invalid_config(mode, error) from None
    lines = [counted(len(grid['cells']), "cell"), *estimate_lines(config, grid)]
    return "**Estimate:** " + "; ".join(lines) + "." + (f" {note}" if note else "")


def launch(app: AppSettings, mode: str, config_file: str, sweep: str, study: str, models: list[str],
           levels: list[str], data: str, limit: float | None, seeds_text: str, judge: str, max_tokens: float, temperature: float) -> jobs.Job:
    """Validate the form, write the job's config, check it as the dry run does (and that its models and judges can run
    here), and start it in the background (nothing is left behind when refused). The job carries a note when the
    limit cuts nothing."""

    sweep = checked_name(sweep)
    limit_value = _form_values(mode, limit, max_tokens, temperature)
    job_id = time.strftime("%Y%m%d-%H%M%S-") + sweep[:24]
    app.jobs_dir.mkdir(parents=True, exist_ok=True)
    _check_room(app)
    form = (study, models, levels, data, seeds_text, judge, max_tokens, temperature)
    try:
        config, config_file_used, command, written = _job_config(app, job_id, mode, config_file, sweep, limit_value,
                                                                 form)
    except UserError as error:  # a config the platform rejects is reported, not launched
        raise invalid_config(mode, error) from None
    try:
        grid = checked(config)
        note = limit_note(config, grid)
        return jobs.start_job(app.jobs_dir, study=config.study, sweep=config.sweep, command=command,
                              total_cells=len(grid["cells"]), config_path=config_file_used, cwd=app.repo,
                              max_jobs=app.max_jobs, job_id=job_id, stages=progress_plan(config), note=note)
    except UserError as error:  # a config that cannot run here is refused before it starts
        if written is not None:
            written.unlink(missing_ok=True)
        raise user_error("The sweep cannot start: " + "; ".join(error.problems)) from None
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
JOB_COLUMN_WIDTHS = ["15%", "12%", "7%", "21%", "8%", "7%", "6%", "24%"]
"""Shares of the jobs table's width: the whole table fits a 1440 px page, long texts wrap inside their column."""


def jobs_table(app: AppSettings) -> pd.DataFrame:
    rows = []
    for job in jobs.list_jobs(app.jobs_dir)[:20]:
        end = job.finished_at or time.time()
        elapsed = f"{end - job.started_at:.0f} s" if job.started_at else ""
        status = "stopped" if job.status == "cancelled" else job.status
        rows.append({"job": job.job_id, "sweep": job.sweep, "status": status,
                     "progress": job_progress.progress_of(job)[1],
                     "cells": cells_column(job),
                     "started": job_progress.clock(job.started_at), "elapsed": elapsed,
                     "last output": jobs.last_line(job)})
    return pd.DataFrame(rows, columns=JOB_COLUMNS)


def cells_column(job: jobs.Job) -> str:
    """The jobs table's cells: finished out of the grid's, and the failed ones apart ('0/12 · 12 failed')."""
    done, failed = job_progress.cell_counts(job)
    return f"{done}/{job.total_cells}{job_progress.failed_note(failed)}"


def judge_outcome(job: jobs.Job) -> str:
    """The warning about each judge that failed its control checks in the ended job's sweep (from its parent run's
    `judge_check/<judge>` tags), worded as every other tab words it; empty when none failed, when the job ended before
    its checks (stopped or lost), or when the store cannot be read."""
    if job.status not in ("finished", "failed"):
        return ""
    try:
        failing = sweep_failing_judges(experiment_of(job.study), job.sweep)
    except Exception:  # an unreachable store: the job's own outcome still stands
        return ""
    return ". ".join(f"**{judge_warning(judge, checks)}**" for judge, checks in failing.items())


def announce(app: AppSettings, job_id: str | None) -> tuple[Any, Any]:
    """(the message, the job followed): what the followed job did once it ended, with the warning about a judge that
    failed its control checks, and no job followed from then on; else no change to either. A tick that began before a
    Stop or a launch chose the job to follow ends after it on a busy machine: had it written back the job it started
    with (none), the Stop's message would never come."""
    if not job_id:
        return gr.skip(), gr.skip()
    job = next((j for j in jobs.list_jobs(app.jobs_dir) if j.job_id == job_id), None)
    if job is not None and job.status in jobs.ACTIVE:
        return gr.skip(), gr.skip()
    warning = judge_outcome(job) if job is not None else ""
    return job_progress.ended_message(job) + (f" {warning}." if warning else ""), None


LOG_CHARS = 12_000
"""How much of the latest job's output the box shows (whole lines from its end): a small sweep's report tables."""
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
"""A line of a markdown pipe table (the sweep prints its report's tables so)."""
TABLE_RULE = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")
"""The rule under a pipe table's header."""


def log_html(text: str) -> str:
    """A job's output for the page: its lines as they are, each markdown pipe table (a header, its rule, rows) as an
    HTML table in a horizontally scrolling box, and a report's `## title` line as its heading; a placeholder while it
    has none."""
    if not text.strip():
        return f"<div class='job-log empty'>{esc(texts()['job_log_empty'])}</div>"
    lines = text.splitlines()
    parts: list[str] = []
    plain: list[str] = []

    def flush() -> None:
        if plain:
            parts.append(f"<pre class='log-lines'>{esc(chr(10).join(plain))}</pre>")
            plain.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        if TABLE_ROW.match(line) and index + 1 < len(lines) and TABLE_RULE.match(lines[index + 1]):
            end = index + 2
            while end < len(lines) and TABLE_ROW.match(lines[end]):
                end += 1
            flush()
            parts.append(_pipe_table(lines[index], lines[index + 2:end]))
            index = end
            continue
        if line.startswith("## "):
            flush()
            parts.append(f"<div class='log-title'>{esc(line[3:])}</div>")
        else:
            plain.append(line)
        index += 1
    flush()
    return f"<div class='job-log'>{''.join(parts)}</div>"


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _pipe_table(header: str, rows: list[str]) -> str:
    head = "".join(f"<th>{esc(cell)}</th>" for cell in _cells(header))
    body = "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in _cells(row)) + "</tr>" for row in rows)
    return (f"<div class='log-table-scroll'><table class='log-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["launch"])
    catalog = model_catalog(app)
    models_ = list(catalog["models"])
    files = data_files(app, study_named(None))
    configs = config_files(app)

    errors = FieldErrors("launch")
    with gr.Row():
        mode = gr.Radio([FROM_FORM, FROM_CONFIG], value=FROM_FORM, label="Launch from", elem_id="launch-mode")
        with gr.Column():
            sweep = gr.Textbox("", label="Sweep name", placeholder="e.g. my-sweep", elem_id="launch-sweep")
            errors.box("sweep")
    with gr.Group(visible=False) as config_group:
        config_file = gr.Dropdown(configs, value=configs[0] if configs else None, label="Config file",
                                  info="pick one, or type the path of any config (e.g. "
                                       "examples/continuation/continuation.yaml)",
                                  allow_custom_value=True, elem_id="launch-config")
        errors.box("config")
    with gr.Group(visible=True) as form_group:
        with gr.Row():
            study = gr.Dropdown(list(single_turn_studies()), value=study_named(None).name, label="Study",
                                elem_id="launch-study")
            with gr.Column():
                models = gr.Dropdown(models_, value=models_[:1], multiselect=True, label="Models",
                                     elem_id="launch-models")
                errors.box("models")
            with gr.Column():
                settings, default = prompt_setting_choices(study_named(None))
                levels = gr.Dropdown(settings, value=default, multiselect=True, label="Prompt settings",
                                     elem_id="launch-levels")
                errors.box("levels")
            judge = gr.Dropdown([NO_JUDGE, *judge_names(catalog)], value=NO_JUDGE, label="Judge",
                                elem_id="launch-judge")
        with gr.Row():
            data = gr.Dropdown(files, value=files[0] if files else None, label="Data", elem_id="launch-data")
            with gr.Column():
                seeds = gr.Textbox("0", label="Seeds", elem_id="launch-seeds")
                errors.box("seeds")
            # No minimum/maximum on these: Gradio refuses an out-of-range number with a logged traceback and a toast;
            # the launch checks them and says so under the field.
            with gr.Column():
                max_tokens = gr.Number(96, label=f"Max new tokens ({MAX_TOKENS[0]}-{MAX_TOKENS[1]})",
                                       elem_id="launch-max-tokens")
                errors.box("max-tokens")
            with gr.Column():
                temperature = gr.Number(0.3, label="Temperature (0-2)", elem_id="launch-temperature")
                errors.box("temperature")
    limit = gr.Number(4, label="Limit (instances; 0 = all)", elem_id="launch-limit")
    errors.box("limit")
    note = gr.Markdown(elem_id="launch-name-note")
    with gr.Row():
        start = gr.Button("Launch", variant="primary", elem_id="launch-go")
        estimate_button = gr.Button("Estimate cost", scale=0, elem_id="launch-estimate")
    errors.box(FORM)
    estimate_text = gr.Markdown(elem_id="launch-estimate-text")
    message = gr.Markdown(elem_id="launch-message")
    progress_bars = gr.HTML(job_progress.progress_html(app), elem_id="launch-progress")
    table = gr.Dataframe(jobs_table(app), interactive=False, wrap=True, label="Jobs", elem_id="jobs-table",
                         column_widths=JOB_COLUMN_WIDTHS)
    with gr.Row():
        with gr.Column(scale=3):
            cancel_id = gr.Dropdown([], label="Job to stop", allow_custom_value=True, elem_id="launch-cancel-id")
            errors.box("cancel-id")
        cancel = gr.Button("Stop job", variant="stop", scale=0, elem_id="launch-cancel")
    gr.Markdown("**Output of the latest job**", elem_classes=["job-log-label"])
    log = gr.HTML(log_html(""), elem_id="launch-log")
    timer = gr.Timer(2.0)
    job_state = gr.State(None)

    mode.change(lambda m: (gr.Group(visible=m == FROM_CONFIG), gr.Group(visible=m == FROM_FORM)), [mode],
                [config_group, form_group])

    def on_study(name: str | None, path: str | None):
        choices, value = prompt_setting_choices(study_named(name))
        paths = data_files(app, study_named(name))
        return (gr.Dropdown(choices=choices, value=value),
                gr.Dropdown(choices=paths, value=path if path in paths else paths[0] if paths else None))

    def on_launch(*values):
        resumed = bool(name_note(values[2]))
        job = launch(app, *values)
        text = (f"Started **{esc(job.sweep)}** as job `{job.job_id}` ({counted(job.total_cells, 'cell')}). "
                "It keeps running if you close this page; its runs appear under **Runs**.")
        if resumed:
            text += " It resumes the existing sweep of that name."
        if job.note:
            text += f" {job.note}"
        return text, job.job_id, jobs_table(app)

    def on_tick(followed: str | None):
        listed = jobs.list_jobs(app.jobs_dir)
        active = [j.job_id for j in listed if j.status in jobs.ACTIVE]
        tail = jobs.log_tail(listed[0], LOG_CHARS) if listed else ""
        return (jobs_table(app), gr.Dropdown(choices=active), log_html(tail), job_progress.progress_html(app),
                *announce(app, followed))

    def on_cancel(job_id: str | None):
        job = next((j for j in jobs.list_jobs(app.jobs_dir) if j.job_id == job_id), None)
        if job is None:
            raise user_error("Pick a running job.", "cancel-id")
        jobs.cancel_job(job)
        return f"Asked job `{job.job_id}` to stop; what it kept is said here once it has.", job.job_id

    inputs = [mode, config_file, sweep, study, models, levels, data, limit, seeds, judge, max_tokens, temperature]
    # No progress overlay on the message: the bars below show where the job stands, the message what it did.
    start.click(errors.beside_the_fields(on_launch, 3), inputs, [message, job_state, table, *errors.outputs],
                show_progress="hidden")
    # An estimate is of the form as it was: a launch, or another config, makes it stale.
    for changed in (start.click, mode.change, config_file.change):
        changed(lambda: "", None, [estimate_text], show_progress="hidden")
    estimate_button.click(errors.beside_the_fields(partial(estimate, app), 1), inputs, [estimate_text, *errors.outputs])
    timer.tick(on_tick, [job_state], [table, cancel_id, log, progress_bars, message, job_state], show_progress="hidden")
    sweep.change(name_note, [sweep], [note])
    study.change(on_study, [study, data], [levels, data])
    cancel.click(errors.beside_the_fields(on_cancel, 2), [cancel_id], [message, job_state, *errors.outputs])
    return {"sweep": sweep, "start": start, "table": table}
