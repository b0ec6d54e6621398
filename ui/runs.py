"""Runs tab: a sweep's cell runs with the study's headline numbers first, a chart, a CSV download and links to MLflow.

The metric columns come from the metrics registry (plugins included) and the judges the runs logged:
model, setting, condition, AtAvg, each automatic metric, then each judge's QAvg and High%. Judge
dimensions and operational numbers (extraction, failures, tokens, seconds) sit behind a toggle.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import gradio as gr
import pandas as pd

from narrative_eval.stats.reference import load_reference, reference_wide
from narrative_eval.study import study_of_experiment
from ui.common import (STUDIES, AppSettings, cell_runs, column, judge_ids_of, mlflow_ui_available, pick_sweep, run_label,
                       run_link, texts)

MEAN = "mean over seeds"
ALL_JUDGES = "all judges"
SEED_PREFIX = re.compile(r"^seed(\d+)/")
LABELS = {"at_avg": "AtAvg", "bertscore": "BERTScore", "rouge1": "ROUGE-1", "meteor": "METEOR", "chrf": "chrF",
          "semf1": "Sem-F1", "ci": "Creative Integrity", "adherence": "Adherence", "icir": "ICIR",
          "extraction_success_rate": "extraction ok", "request_failure_rate": "failed requests",
          "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens",
          "generation_seconds": "generation s", "qavg": "QAvg", "high_pct": "High%", "failure_rate": "judge failures"}
"""Readable column names; a metric without one (a plugin) is shown under its registered name."""
IDENTITY = ["run", "model", "setting", "condition", "status"]


def label(metric: str) -> str:
    """'judge/<id>/qavg' -> 'QAvg · <id>', 'chrf' -> 'chrF'."""
    if metric.startswith("judge/"):
        _, judge, name = metric.split("/", 2)
        return f"{LABELS.get(name, name)} · {judge}"
    return LABELS.get(metric, metric)


def seeds_of(runs: pd.DataFrame) -> list[str]:
    found = sorted({int(m.group(1)) for c in runs.columns if (m := SEED_PREFIX.match(c.removeprefix("metrics.")))})
    return [str(s) for s in found]


def headline_metrics(study: str, judges: list[str]) -> list[str]:
    """The headline numbers the study of MLflow experiment `study` names for these judges, in its order; an
    experiment no study owns has none (its metrics show behind the toggle)."""
    owner = study_of_experiment(study)
    return owner.headline_metrics(judges) if owner is not None else []


def metric_columns(runs: pd.DataFrame, seed: str, judge: str, everything: bool = False,
                   study: str = "") -> list[tuple[str, str]]:
    """(source column, metric name) for the chosen seed (or the mean) and judge: headlines first, the rest if asked."""
    prefix = "metrics." if seed == MEAN else f"metrics.seed{seed}/"
    present = {}
    for name in runs.columns:
        metric = name[len(prefix):] if name.startswith(prefix) else None
        if metric is None or (seed == MEAN and (SEED_PREFIX.match(metric) or metric.endswith("_sd"))):
            continue
        if metric.startswith("judge/") and judge != ALL_JUDGES and metric.split("/")[1] != judge:
            continue
        present[metric] = name
    judges = list(dict.fromkeys(m.split("/")[1] for m in present if m.startswith("judge/")))
    headlines = [m for m in headline_metrics(study, judges) if m in present]
    chosen = [(present[m], m) for m in headlines]
    if everything:
        chosen += [(present[m], m) for m in sorted(present) if m not in headlines]
    return chosen


def runs_frame(runs: pd.DataFrame, seed: str, judge: str, everything: bool, study: str = "") -> pd.DataFrame:
    """One row per run: identity columns, then the metrics under readable names, then the full run id."""
    table = pd.DataFrame({
        "run": [run_label(row) for _, row in runs.iterrows()],
        "model": column(runs, "params.model_id").fillna("").values,
        "setting": column(runs, "params.prompt_setting").fillna("").values,
        "condition": column(runs, "params.condition").fillna("").values,
        "status": column(runs, "status").fillna("").values,
    })
    for source, metric in metric_columns(runs, seed, judge, everything, study):
        table[label(metric)] = pd.to_numeric(runs[source], errors="coerce").round(4).values
    table["run id"] = column(runs, "run_id").values
    return table


def published_rows(table: pd.DataFrame, reference: tuple[str, str]) -> pd.DataFrame:
    """A study's published main-results rows (reference name and source: the infilling study's Table 3, AtAvg and
    QAvg per model x level) in the Runs table's layout, marked published; their QAvg is the study's own judge, so
    it gets its own column."""
    name, source = reference
    wide = reference_wide(load_reference(name))
    wide = wide[wide["source"] == source]
    rows = pd.DataFrame({
        "run": [f"{m} · {s} (published)" for m, s in zip(wide["model"], wide["setting"])],
        "model": wide["model"].values, "setting": wide["setting"].values, "condition": "",
        "status": source,
    })
    rows[label("at_avg")] = wide.get("at_avg", pd.Series(dtype=float)).values
    rows["QAvg · published judge"] = wide.get("qavg", pd.Series(dtype=float)).values
    return pd.concat([table, rows], ignore_index=True)


def filtered_runs(study: str, sweep: str | None, models: list[str], settings_: list[str], conditions: list[str]) -> pd.DataFrame:
    runs = cell_runs(study, sweep, finished_only=False)
    for values, name in ((models, "params.model_id"), (settings_, "params.prompt_setting"), (conditions, "params.condition")):
        if values and not runs.empty:
            runs = runs[column(runs, name).isin(values)]
    return runs


def runs_table(study: str, sweep: str | None, models: list[str], settings_: list[str], conditions: list[str],
               seed: str, judge: str, app: AppSettings, everything: bool = False,
               published: bool = False) -> tuple[pd.DataFrame, str]:
    """The table shown (run ids linked to MLflow when its UI answers, the published rows below when asked
    for) and a note under it."""
    runs = filtered_runs(study, sweep, models, settings_, conditions)
    if runs.empty:
        return pd.DataFrame({"": [texts()["no_runs"] if sweep else texts()["no_sweeps"]]}), ""
    table = runs_frame(runs, seed or MEAN, judge or ALL_JUDGES, everything, study)
    linked = mlflow_ui_available(app.mlflow_ui_url)
    if linked:
        table["run id"] = [f"[{r[:8]}]({run_link(app.mlflow_ui_url, e, r)})"
                           for e, r in zip(column(runs, "experiment_id"), column(runs, "run_id"))]
    else:
        table["run id"] = [r[:8] for r in table["run id"]]
    notes = [] if linked else [f"Run ids link to MLflow when `mlflow ui` answers at {app.mlflow_ui_url}."]
    owner = study_of_experiment(study)
    if published and owner is not None and owner.published_reference is not None:
        table = published_rows(table, owner.published_reference).fillna("")
        notes.append("Published rows: the study's Table 3, on its full benchmark with its own judge (GPT-4.1-mini); "
                     "compare AtAvg directly, QAvg only as a rough guide.")
    return table, " ".join(notes)


def csv_file(study: str, sweep: str | None, models, settings_, conditions, seed: str, judge: str) -> str | None:
    """Every column of the filtered runs (full run ids), as a CSV file to download."""
    runs = filtered_runs(study, sweep, models or [], settings_ or [], conditions or [])
    if runs.empty:
        return None
    folder = Path(tempfile.mkdtemp(prefix="narrative-eval-runs-"))
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', sweep or 'runs')}-runs.csv"
    runs_frame(runs, seed or MEAN, judge or ALL_JUDGES, everything=True, study=study).to_csv(path, index=False)
    return str(path)


def chart_choices(runs: pd.DataFrame) -> list[str]:
    """What the bar chart can show: AtAvg and each judge's QAvg, when logged."""
    choices = ["AtAvg"] if "metrics.at_avg" in runs.columns else []
    return choices + [f"QAvg · {j}" for j in judge_ids_of(list(runs.columns))
                      if f"metrics.judge/{j}/qavg" in runs.columns]


def chart(runs: pd.DataFrame, shown: str | None):
    """Grouped bars: the chosen number per model, one bar per prompt setting (finished runs only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if runs.empty or not shown:
        return None
    source = "metrics.at_avg" if shown == "AtAvg" else f"metrics.judge/{shown.split(' · ', 1)[1]}/qavg"
    done = runs[column(runs, "status") == "FINISHED"] if "status" in runs.columns else runs
    if source not in done.columns or done.empty:
        return None
    frame = pd.DataFrame({"model": column(done, "params.model_id").values, "setting": column(done, "params.prompt_setting").values,
                          "value": pd.to_numeric(done[source], errors="coerce").values})
    pivot = frame.pivot_table(index="model", columns="setting", values="value", aggfunc="mean")
    figure, axes = plt.subplots(figsize=(7, 3.2))
    pivot.plot.bar(ax=axes, rot=0)
    axes.set_ylabel(shown)
    axes.set_xlabel("")
    axes.legend(title="setting", fontsize=8, ncols=min(len(pivot.columns), 6))
    figure.tight_layout()
    plt.close(figure)
    return figure


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
    with gr.Row():
        everything = gr.Checkbox(False, label="Show judge dimensions and operational columns (extraction, failures, "
                                 "tokens, time)", elem_id="runs-everything")
        published = gr.Checkbox(False, label="With the study's published rows (infilling, Table 3)",
                                elem_id="runs-published")
    table = gr.Dataframe(pd.DataFrame({"": ["Loading runs…"]}), interactive=False, wrap=False, elem_id="runs-table",
                         datatype="markdown", max_height=520)
    note = gr.Markdown(elem_id="runs-note")
    with gr.Row():
        download = gr.DownloadButton("Download CSV", elem_id="runs-download", scale=0)
        shown = gr.Dropdown([], label="Chart", elem_id="runs-chart-metric", scale=1)
    plot = gr.Plot(elem_id="runs-chart", show_label=False)

    def on_study(study_name: str, current: str | None = None):
        names, value = pick_sweep(study_name, current)
        return gr.Dropdown(choices=names, value=value)

    def on_sweep(study_name: str, sweep_name: str | None):
        runs = cell_runs(study_name, sweep_name, finished_only=False)

        def options(name: str) -> list[str]:
            return sorted({str(v) for v in column(runs, name).dropna() if str(v)}) if not runs.empty else []
        judges = judge_ids_of(list(runs.columns)) if not runs.empty else []
        charts = chart_choices(runs) if not runs.empty else []
        return (gr.Dropdown(choices=options("params.model_id"), value=[]),
                gr.Dropdown(choices=options("params.prompt_setting"), value=[]),
                gr.Dropdown(choices=options("params.condition"), value=[]),
                gr.Dropdown(choices=[MEAN, *seeds_of(runs)], value=MEAN),
                gr.Dropdown(choices=[ALL_JUDGES, *judges], value=ALL_JUDGES),
                gr.Dropdown(choices=charts, value=charts[0] if charts else None))

    def on_filter(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_, everything_, shown_,
                  published_=False):
        shown_table, shown_note = runs_table(study_name, sweep_name, models_ or [], settings_ or [], conditions_ or [],
                                             seed_, judge_, app, bool(everything_), bool(published_))
        runs = filtered_runs(study_name, sweep_name, models_ or [], settings_ or [], conditions_ or [])
        path = csv_file(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_)
        return shown_table, shown_note, gr.DownloadButton(value=path, interactive=path is not None), chart(runs, shown_)

    filters = [study, sweep, models, setting, condition, seed, judge, everything, shown, published]
    outputs = [table, note, download, plot]
    sweep_outputs = [models, setting, condition, seed, judge, shown]
    study.change(on_study, [study], [sweep])
    sweep.change(on_sweep, [study, sweep], sweep_outputs).then(on_filter, filters, outputs)
    for control in (models, setting, condition, seed, judge, everything, shown, published):
        control.input(on_filter, filters, outputs)
    refresh.click(on_study, [study, sweep], [sweep]).then(on_sweep, [study, sweep], sweep_outputs).then(
        on_filter, filters, outputs)
    demo.load(on_study, [study], [sweep])
    return {"study": study, "sweep": sweep, "table": table, "refresh": refresh}
