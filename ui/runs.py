"""Runs tab: a sweep's cell runs and their metrics, filtered by model, setting, condition, seed and judge."""

from __future__ import annotations

import re

import gradio as gr
import pandas as pd

from ui.common import STUDIES, AppSettings, cell_runs, column, judge_ids_of, mlflow_ui_available, pick_sweep, run_label, run_link, texts

MEAN = "mean over seeds"
ALL_JUDGES = "all judges"
# Columns shown first, in this order, when a run logged them.
PREFERRED = ("at_avg", "bertscore", "rouge1", "meteor", "chrf", "semf1", "extraction_success_rate", "ci", "adherence",
             "icir", "request_failure_rate", "completion_tokens", "generation_seconds")
SEED_PREFIX = re.compile(r"^seed(\d+)/")


def seeds_of(runs: pd.DataFrame) -> list[str]:
    found = sorted({int(m.group(1)) for c in runs.columns if (m := SEED_PREFIX.match(c.removeprefix("metrics.")))})
    return [str(s) for s in found]


def metric_columns(runs: pd.DataFrame, seed: str, judge: str) -> list[tuple[str, str]]:
    """(source column, shown name) for the chosen seed (or the mean) and judge."""
    prefix = "metrics." if seed == MEAN else f"metrics.seed{seed}/"
    chosen = []
    for name in runs.columns:
        if not name.startswith(prefix):
            continue
        metric = name[len(prefix):]
        if seed == MEAN and (SEED_PREFIX.match(metric) or metric.endswith("_sd")):
            continue
        if metric.startswith("extraction_") and metric != "extraction_success_rate":
            continue
        if metric.startswith("judge/"):
            judge_id = metric.split("/")[1]
            if judge != ALL_JUDGES and judge_id != judge:
                continue
        chosen.append((name, metric))
    order = {metric: i for i, metric in enumerate(PREFERRED)}
    chosen.sort(key=lambda pair: (not pair[1].startswith("judge/") and pair[1] not in order,
                                  order.get(pair[1], len(order)), pair[1]))
    return chosen


def runs_table(study: str, sweep: str | None, models: list[str], settings_: list[str], conditions: list[str],
               seed: str, judge: str, app: AppSettings) -> tuple[pd.DataFrame, str]:
    runs = cell_runs(study, sweep, finished_only=False)
    if runs.empty:
        return pd.DataFrame({"": [texts()["no_runs"] if sweep else texts()["no_sweeps"]]}), ""
    for values, name in ((models, "params.model_id"), (settings_, "params.prompt_setting"), (conditions, "params.condition")):
        if values:
            runs = runs[column(runs, name).isin(values)]
    table = pd.DataFrame({
        "run": [run_label(row) for _, row in runs.iterrows()],
        "model": column(runs, "params.model_id").fillna("").values,
        "setting": column(runs, "params.prompt_setting").fillna("").values,
        "condition": column(runs, "params.condition").fillna("").values,
        "status": column(runs, "status").fillna("").values,
    })
    for source, shown in metric_columns(runs, seed or MEAN, judge or ALL_JUDGES):
        table[shown] = pd.to_numeric(runs[source], errors="coerce").round(4).values
    note = ""
    if mlflow_ui_available(app.mlflow_ui_url):
        table["mlflow"] = [f"[open]({run_link(app.mlflow_ui_url, e, r)})"
                           for e, r in zip(column(runs, "experiment_id"), column(runs, "run_id"))]
    else:
        note = f"Links to runs appear when `mlflow ui` answers at {app.mlflow_ui_url}."
    return table, note


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["runs"])
    with gr.Row():
        study = gr.Dropdown(list(STUDIES), value=STUDIES[0], label="Study", elem_id="runs-study")
        sweep = gr.Dropdown([], label="Sweep", elem_id="runs-sweep", allow_custom_value=True)
        refresh = gr.Button("Refresh", elem_id="runs-refresh", scale=0)
    with gr.Row():
        models = gr.Dropdown([], multiselect=True, label="Models (all when empty)")
        setting = gr.Dropdown([], multiselect=True, label="Levels / paradigms")
        condition = gr.Dropdown([], multiselect=True, label="Conditions")
        seed = gr.Dropdown([MEAN], value=MEAN, label="Seed")
        judge = gr.Dropdown([ALL_JUDGES], value=ALL_JUDGES, label="Judge")
    table = gr.Dataframe(pd.DataFrame({"": ["Loading runs…"]}), interactive=False, wrap=True, elem_id="runs-table",
                         datatype="markdown")
    note = gr.Markdown(elem_id="runs-note")

    def on_study(study_name: str, current: str | None = None):
        names, value = pick_sweep(study_name, current)
        return gr.Dropdown(choices=names, value=value)

    def on_sweep(study_name: str, sweep_name: str | None):
        runs = cell_runs(study_name, sweep_name, finished_only=False)
        def options(name: str) -> list[str]:
            return sorted({str(v) for v in column(runs, name).dropna() if str(v)}) if not runs.empty else []
        judges = judge_ids_of(list(runs.columns)) if not runs.empty else []
        shown, shown_note = runs_table(study_name, sweep_name, [], [], [], MEAN, ALL_JUDGES, app)
        return (gr.Dropdown(choices=options("params.model_id"), value=[]),
                gr.Dropdown(choices=options("params.prompt_setting"), value=[]),
                gr.Dropdown(choices=options("params.condition"), value=[]),
                gr.Dropdown(choices=[MEAN, *seeds_of(runs)], value=MEAN),
                gr.Dropdown(choices=[ALL_JUDGES, *judges], value=ALL_JUDGES),
                shown, shown_note)

    def on_filter(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_):
        return runs_table(study_name, sweep_name, models_ or [], settings_ or [], conditions_ or [], seed_, judge_, app)

    filters = [study, sweep, models, setting, condition, seed, judge]
    sweep_outputs = [models, setting, condition, seed, judge, table, note]
    study.change(on_study, [study], [sweep])
    sweep.change(on_sweep, [study, sweep], sweep_outputs)
    for control in (models, setting, condition, seed, judge):
        control.input(on_filter, filters, [table, note])
    refresh.click(on_study, [study, sweep], [sweep]).then(on_sweep, [study, sweep], sweep_outputs)
    demo.load(on_study, [study], [sweep])
    return {"study": study, "sweep": sweep, "table": table, "refresh": refresh}
