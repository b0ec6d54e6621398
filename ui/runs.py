"""Runs tab: a sweep's cell runs with the study's headline numbers first, as `mean [lo, hi]` under readable
labels, a chart, a CSV download and links to MLflow.

The metric columns come from the study's headlines (the metrics registry, plugins included, and the judges the
runs logged); every other logged number sits in a named column set (judge dimensions, extraction, requests and
time, cost ...) the user adds. Labels and sets come from narrative_eval.reports.labels, as in the reports (a judge
dimension as the rubric that scored it names it). A judge that failed its control checks on a run is flagged beside
the numbers it produced.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import gradio as gr
import pandas as pd

from narrative_eval.records import finite_number
from narrative_eval.records.keys import bounded_name, interval_keys, parse_judge_key, parse_seed_key, seed_key
from narrative_eval.reports.labels import column_set_names, column_set_of, is_count, label, labels, sweep_rubrics
from narrative_eval.reports.tables import interval_text
from narrative_eval.stats.judge_checks import TAG_PREFIX
from narrative_eval.stats.reference import load_reference, reference_wide
from narrative_eval.study import study_of_experiment
from ui.common import (STUDIES, AppSettings, cell_runs, column, failed_judge_checks, filter_runs, html_table,
                       judge_check_note, judge_ids_of, mlflow_ui_available, pick_sweep, run_label, run_link, texts)
from ui.downloads import content_version, download_file

MEAN = "mean over seeds"
ALL_JUDGES = "all judges"
INTERVAL_CELL = re.compile(r"^(?P<mean>\S+) (?P<interval>\[[^\]]+\])$")
LINK_CELL = re.compile(r"^\[(?P<text>[^\]]+)\]\((?P<url>[^)]+)\)$")
IDENTITY = ["model", "setting", "condition", "status"]
CHECKS = "judge checks"
RUN_ID = "run id"
SD_EXAMPLE = "at_avg_sd"
"""A spread-across-seeds name: its column set is the one a one-seed sweep does not offer."""
FAILURE_RATE = "failure_rate"
"""How a judge's share of failed judgments ends (all of them, or of one kind: a study's checklist, its quality rating)."""
CHART_LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "frameon": False, "fontsize": 8}
"""The chart's legend sits right of the axes, never over a bar."""


def seeds_of(runs: pd.DataFrame) -> list[str]:
    found = sorted({parsed[0] for c in runs.columns if (parsed := parse_seed_key(c.removeprefix("metrics.")))})
    return [str(s) for s in found]


def headline_metrics(study: str, judges: list[str]) -> list[str]:
    """The headline numbers the study of MLflow experiment `study` names for these judges, in its order; an
    experiment no study owns has none (its metrics sit in the column sets)."""
    owner = study_of_experiment(study)
    return owner.headline_metrics(judges) if owner is not None else []


def runs_rubrics(runs: pd.DataFrame, study: str) -> tuple[str, ...]:
    """The rubrics the runs' judge dimensions read under: those their cells logged, then those of the study of MLflow
    experiment `study` (reports.labels.sweep_rubrics)."""
    return sweep_rubrics(study_of_experiment(study), runs)


def _present(runs: pd.DataFrame, prefix: str, seed: str, judge: str) -> dict[str, str]:
    """metric name -> source column of the chosen seed (or the mean) and judge, bounds of intervals left out."""
    present: dict[str, str] = {}
    for name in runs.columns:
        metric = name[len(prefix):] if name.startswith(prefix) else None
        if metric is None or (seed == MEAN and parse_seed_key(metric)):
            continue
        if judge != ALL_JUDGES and (judged := parse_judge_key(metric)) is not None and judged[0] != judge:
            continue
        present[metric] = name
    return {m: c for m, c in present.items() if bounded_name(m) not in present}


def metric_columns(runs: pd.DataFrame, seed: str, judge: str, sets: Sequence[str] = (),
                   study: str = "") -> list[tuple[str, str]]:
    """(source column, metric name) for the chosen seed (or the mean) and judge: the headlines first, then the
    numbers of the chosen column sets, set by set."""
    present = _present(runs, "metrics." if seed == MEAN else f"metrics.{seed_key(int(seed), '')}", seed, judge)
    judges = list(dict.fromkeys(judged[0] for m in present if (judged := parse_judge_key(m)) is not None))
    headlines = [m for m in headline_metrics(study, judges) if m in present]
    chosen = [(present[m], m) for m in headlines]
    for name in column_set_names():
        if name in sets:
            chosen += [(present[m], m) for m in sorted(present) if m not in headlines and column_set_of(m) == name]
    return chosen


def available_sets(runs: pd.DataFrame, study: str) -> list[str]:
    """The column sets that hold some number of these runs beyond the headlines; the spread across seeds only when
    some run has more than one seed (with one, every SD reads 0.000, which says nothing)."""
    everything = {m for _, m in metric_columns(runs, MEAN, ALL_JUDGES, column_set_names(), study)}
    headlines = {m for _, m in metric_columns(runs, MEAN, ALL_JUDGES, (), study)}
    found = {column_set_of(m) for m in everything - headlines}
    if len(seeds_of(runs)) < 2:
        found.discard(column_set_of(SD_EXAMPLE))
    return [name for name in column_set_names() if name in found]


def digits_for(metric: str, values: pd.Series) -> int:
    """Decimals a column shows: none for a count (the label map's `is_count`) or numbers in the hundreds and more,
    one for a percentage, two for scores on a 1-5 scale, three for scores in [0, 1]."""
    largest = values.abs().max() if values.notna().any() else 0.0
    if is_count(metric):
        return 0
    if metric.endswith("_pct"):
        return 1
    return 0 if largest >= 100 else 2 if largest >= 1.5 else 3


def cell_text(mean: object, lo: object, hi: object, digits: int = 3) -> str:
    """`mean [lo, hi]` ('–' when the run did not log the number)."""
    if finite_number(mean) is None:
        return "–"
    return interval_text(finite_number(mean), lo, hi, digits)


def runs_frame(runs: pd.DataFrame, seed: str, judge: str, sets: Sequence[str] = (), study: str = "",
               as_text: bool = True) -> pd.DataFrame:
    """One row per run: identity, the metrics under their labels (`mean [lo, hi]` text, or with `as_text`
    False numbers with their bounds in '<label> low'/'<label> high' columns), the judge checks, the run id."""
    table = pd.DataFrame({
        "model": [row.get("params.model_id") if isinstance(row.get("params.model_id"), str) else run_label(row)
                  for _, row in runs.iterrows()],
        "setting": column(runs, "params.prompt_setting").fillna("").values,
        "condition": column(runs, "params.condition").fillna("").values,
        "status": column(runs, "status").fillna("").values,
    })
    columns = metric_columns(runs, seed, judge, sets, study)
    named = labels([metric for _, metric in columns], runs_rubrics(runs, study))
    table.attrs["names"] = {named[metric]: metric for _, metric in columns}
    for source, metric in columns:
        values = pd.to_numeric(runs[source], errors="coerce")
        lo, hi = (pd.to_numeric(column(runs, bound, None), errors="coerce") for bound in interval_keys(source))
        if as_text:
            digits = digits_for(metric, values)
            table[named[metric]] = [cell_text(*v, digits) if finite_number(v[0]) is not None else
                                    missing_text(row, metric)
                                    for v, (_, row) in zip(zip(values, lo, hi, strict=True), runs.iterrows(),
                                                           strict=True)]
            continue
        table[named[metric]] = values.round(4).values
        if lo.notna().any():
            table[f"{named[metric]} low"], table[f"{named[metric]} high"] = lo.round(4).values, hi.round(4).values
    table[CHECKS] = [_checks_text(row) for _, row in runs.iterrows()]
    table[RUN_ID] = column(runs, "run_id").values
    return table


def missing_text(row: pd.Series, metric: str) -> str:
    """'–' for a number the run did not log, with why when its judge failed on every item ('– smollm2-judge checklist
    failures 100%')."""
    judged = parse_judge_key(metric)
    failed = [label(name.removeprefix("metrics.")) for name in row.index
              if judged is not None and (found := parse_judge_key(name.removeprefix("metrics."))) is not None
              and found[0] == judged[0] and found[1].endswith(FAILURE_RATE) and finite_number(row[name]) == 1.0]
    return f"– {failed[-1]} 100%" if failed else "–"


def _checks_text(row: pd.Series) -> str:
    """'⚠ <judge> failed' per failing judge (the warning itself is said once, over the table), 'passed' when every
    checked judge passed, '' unchecked."""
    failed = failed_judge_checks(row)
    if not failed:
        checked = any(k.startswith(f"tags.{TAG_PREFIX}") and isinstance(row[k], str) for k in row.index)
        return "passed" if checked else ""
    return "; ".join(f"⚠ {judge} failed (see above)" for judge in failed)


def runs_html(table: pd.DataFrame) -> str:
    """The table as HTML: a number's interval in small type under it, run ids as links, each metric header
    carrying its logged name as a tooltip; a note instead of a table when there are no runs."""
    if list(table.columns) == [""]:
        message = html.escape(str(table.iloc[0, 0]))
        message = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", re.sub(r"`(.+?)`", r"<code>\1</code>", message))
        return f"<div class='empty'>{message}</div>"
    return html_table(table, "runs", "runs-scroll", _cell, table.attrs.get("names", {}))


def _cell(column_name: str, value: object) -> str:
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    if (link := LINK_CELL.match(text)) is not None:
        return f"<td><a href='{html.escape(link['url'])}' target='_blank'>{html.escape(link['text'])}</a></td>"
    if (interval := INTERVAL_CELL.match(text)) is not None:
        return (f"<td class='num'>{html.escape(interval['mean'])}"
                f"<span class='ci'>{html.escape(interval['interval'])}</span></td>")
    kind = " class='warn'" if text.startswith("⚠") else " class='num'" if finite_number(text) is not None else ""
    return f"<td{kind}>{html.escape(text)}</td>"


def published_rows(table: pd.DataFrame, reference: tuple[str, str]) -> tuple[pd.DataFrame, str]:
    """A study's published main-results rows (its `published_reference`: the reference file's name and the source of
    the rows it shows, AtAvg and QAvg per model x setting) in the Runs table's layout, marked published, and the note
    that says where they come from (the reference file's own words: its source, benchmark and judge). Their QAvg is
    another judge's, so it gets its own column."""
    name, source = reference
    wide = reference_wide(load_reference(name))
    wide = wide[wide["source"] == source]
    rows = pd.DataFrame({"model": [f"{m} (published)" for m in wide["model"]], "setting": wide["setting"].values,
                         "status": source})
    for name, column_name in (("at_avg", label("at_avg")), ("qavg", f"published judge {label('qavg')}")):
        rows[column_name] = [cell_text(v, None, None) for v in wide.get(name, pd.Series(dtype=float))]
    judges = sorted({str(j) for j in wide.get("judge", pd.Series(dtype=str)) if str(j).strip()})
    on = ", ".join(sorted(set(wide["note"]))) or "the study's benchmark and judge"
    judged = f" ({', '.join(judges)})" if judges else ""
    note = (f"Published rows ({source}): on {on}{judged}, not this sweep's; "
            "compare AtAvg directly, QAvg only as a rough guide.")
    return pd.concat([table, rows], ignore_index=True), note


def filtered_runs(study: str, sweep: str | None, models: list[str], settings_: list[str], conditions: list[str]) -> pd.DataFrame:
    return filter_runs(cell_runs(study, sweep, finished_only=False), models, settings_, conditions)


def _drop_quiet(table: pd.DataFrame) -> pd.DataFrame:
    """Without the condition column when every run has the same one (a one-condition study), and without the
    checks column when no judge was checked: the width goes to the numbers."""
    quiet = [] if table["condition"].astype(str).nunique() > 1 else ["condition"]
    if not table[CHECKS].astype(str).str.len().any():
        quiet.append(CHECKS)
    return table.drop(columns=quiet)


def runs_table(study: str, sweep: str | None, models: list[str], settings_: list[str], conditions: list[str],
               seed: str, judge: str, app: AppSettings, sets: Sequence[str] = (),
               published: bool = False) -> tuple[pd.DataFrame, str]:
    """The table shown (run ids linked to MLflow when its UI answers, the published rows below when asked
    for) and a note under it (judges that failed their checks first)."""
    runs = filtered_runs(study, sweep, models, settings_, conditions)
    if runs.empty:
        return pd.DataFrame({"": [texts()["no_runs"] if sweep else texts()["no_sweeps"]]}), ""
    table = runs_frame(runs, seed or MEAN, judge or ALL_JUDGES, sets, study)
    linked = mlflow_ui_available(app.mlflow_ui_url)
    if linked:
        table[RUN_ID] = [f"[{r[:8]}]({run_link(app.mlflow_ui_url, e, r)})"
                         for e, r in zip(column(runs, "experiment_id"), column(runs, "run_id"))]
    else:
        table[RUN_ID] = [r[:8] for r in table[RUN_ID]]
    notes = [judge_check_note(runs)]
    notes.append("Each number: the mean over every item the cell scored, then over its seeds [95% bootstrap interval "
                 "where the run logged one]; a report's paired comparisons use only the items both conditions scored, "
                 "each with its own n. '–': the run has no such number (with why when its judge failed on every "
                 "item).")
    if not linked:
        notes.append(f"Run ids link to MLflow when `mlflow ui` answers at {app.mlflow_ui_url}.")
    owner = study_of_experiment(study)
    table = _drop_quiet(table)
    if published and owner is not None and owner.published_reference is not None:
        table, published_note = published_rows(table, owner.published_reference)
        table = table.fillna("")
        notes.append(published_note)
    return table, " ".join(n for n in notes if n)


def csv_file(study: str, sweep: str | None, models, settings_, conditions, seed: str, judge: str) -> str | None:
    """Every number of the filtered runs (intervals as low/high columns, full run ids), as a CSV file."""
    runs = filtered_runs(study, sweep, models or [], settings_ or [], conditions or [])
    if runs.empty:
        return None
    table = runs_frame(runs, seed or MEAN, judge or ALL_JUDGES, column_set_names(), study, as_text=False)
    text = table.to_csv(index=False)
    name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', sweep or 'runs')}-runs.csv"
    return str(download_file(name, content_version(text), lambda: text))


def setting_label(study: str) -> str:
    """The prompt-setting filter's label in the words of the study of MLflow experiment `study` (its grid's)."""
    owner = study_of_experiment(study)
    what = owner.config_section.grid.prompt_settings.what if owner is not None else "prompt setting"
    return f"{what.capitalize()}s (all when empty)"


def chart_choices(runs: pd.DataFrame, study: str) -> list[tuple[str, str]]:
    """(label, metric) the bar chart can show: the study's headline numbers the runs logged, in its order."""
    names = headline_metrics(study, judge_ids_of(list(runs.columns)))
    rubrics = runs_rubrics(runs, study)
    return [(label(n, rubrics), n) for n in names if f"metrics.{n}" in runs.columns]


def draw_intervals(axes, frame: pd.DataFrame, pivot: pd.DataFrame, bars: str) -> None:
    """The runs' logged intervals as error bars on the drawn bars (none where a run logged no interval)."""
    lo, hi = (frame.pivot_table(index="model", columns=bars, values=name, aggfunc="mean", dropna=False)
              .reindex(index=pivot.index, columns=pivot.columns) for name in ("lo", "hi"))
    for drawn, name in zip(list(axes.containers), pivot.columns):
        centres = [patch.get_x() + patch.get_width() / 2 for patch in drawn.patches]
        below = (pivot[name] - lo[name]).clip(lower=0).fillna(0).tolist()
        above = (hi[name] - pivot[name]).clip(lower=0).fillna(0).tolist()
        axes.errorbar(centres, pivot[name].fillna(0).tolist(), yerr=[below, above], fmt="none", ecolor="#333333",
                      capsize=3, linewidth=1)


def chart(runs: pd.DataFrame, shown: str | None, study: str = ""):
    """Grouped bars: the chosen metric per model, one bar per prompt setting, or per condition when the runs share one
    setting (finished runs only), with the runs' logged intervals as error bars, the legend beside the axes; labelled
    as the Runs table labels the runs of MLflow experiment `study`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = f"metrics.{shown}"
    done = runs[column(runs, "status") == "FINISHED"] if "status" in runs.columns else runs
    if runs.empty or not shown or source not in done.columns or done.empty:
        return None
    settings = column(done, "params.prompt_setting").fillna("")
    bars = "setting" if settings.nunique() > 1 or column(done, "params.condition").fillna("").nunique() < 2 else \
        "condition"
    frame = pd.DataFrame({"model": column(done, "params.model_id").values,
                          bars: column(done, f"params.{'prompt_setting' if bars == 'setting' else 'condition'}").values,
                          "value": pd.to_numeric(done[source], errors="coerce").values})
    bounds = [bound for bound in interval_keys(source) if bound in done.columns]
    for name, bound in zip(("lo", "hi"), bounds):
        frame[name] = pd.to_numeric(done[bound], errors="coerce").values
    pivot = frame.pivot_table(index="model", columns=bars, values="value", aggfunc="mean")
    if pivot.empty:
        return None
    figure, axes = plt.subplots(figsize=(8, 3.2))
    pivot.plot.bar(ax=axes, rot=0)
    if len(bounds) == 2:
        draw_intervals(axes, frame, pivot, bars)
    axes.set_ylabel(label(shown, runs_rubrics(runs, study)))
    axes.set_xlabel("")
    axes.legend(title=label(bars), **CHART_LEGEND)
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
        setting = gr.Dropdown([], multiselect=True, label=setting_label(STUDIES[0]))
        condition = gr.Dropdown([], multiselect=True, label="Conditions")
        seed = gr.Dropdown([MEAN], value=MEAN, label="Seed")
        judge = gr.Dropdown([ALL_JUDGES], value=ALL_JUDGES, label="Judge")
    with gr.Row():
        sets = gr.CheckboxGroup([], value=[], label="More columns", elem_id="runs-sets", scale=4)
        published = gr.Checkbox(False, label="With the study's published rows", elem_id="runs-published", scale=1,
                                visible=False)
    # The note (a failing judge's warning, once, and what the numbers are) above the table it is about.
    note = gr.Markdown(elem_id="runs-note")
    table = gr.HTML("<div class='empty'>Loading runs…</div>", elem_id="runs-table")
    with gr.Row():
        download = gr.DownloadButton("Download CSV", elem_id="runs-download", scale=0)
        shown = gr.Dropdown([], label="Chart", elem_id="runs-chart-metric", scale=1)
    plot = gr.Plot(elem_id="runs-chart", show_label=False)

    def rows_box(study_name: str):
        """The published rows box only for a study that has them."""
        owner = study_of_experiment(study_name)
        reference = owner.published_reference if owner is not None else None
        return gr.Checkbox(visible=reference is not None, value=False,
                           label=f"With the study's published rows ({reference[1]})" if reference else "")

    def shown_table_only(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_, sets_, shown_,
                         published_=False):
        """The table and its note for the controls' values (what a column set or the published rows change)."""
        shown_table, shown_note = runs_table(study_name, sweep_name, models_ or [], settings_ or [], conditions_ or [],
                                             seed_, judge_, app, sets_ or [], bool(published_))
        return runs_html(shown_table), shown_note

    def shown_chart(study_name, sweep_name, models_, settings_, conditions_, shown_):
        """The chart of the filtered runs' chosen number."""
        return chart(filtered_runs(study_name, sweep_name, models_ or [], settings_ or [], conditions_ or []), shown_,
                     study_name)

    def shown_runs(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_, sets_, shown_,
                   published_=False):
        """The table, its note, its CSV and the chart for the controls' values."""
        path = csv_file(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_)
        return (*shown_table_only(study_name, sweep_name, models_, settings_, conditions_, seed_, judge_, sets_, shown_,
                                  published_),
                gr.DownloadButton(value=path, interactive=path is not None),
                shown_chart(study_name, sweep_name, models_, settings_, conditions_, shown_))

    def sweep_view(study_name: str, sweep_name: str | None):
        """The whole view of a sweep: its filters reset to its own choices, and its table drawn with them."""
        runs = cell_runs(study_name, sweep_name, finished_only=False)

        def options(name: str) -> list[str]:
            return sorted({str(v) for v in column(runs, name).dropna() if str(v)}) if not runs.empty else []
        judges = judge_ids_of(list(runs.columns)) if not runs.empty else []
        charts = chart_choices(runs, study_name) if not runs.empty else []
        chart_metric = charts[0][1] if charts else None
        return (gr.Dropdown(choices=options("params.model_id"), value=[]),
                gr.Dropdown(choices=options("params.prompt_setting"), value=[], label=setting_label(study_name)),
                gr.Dropdown(choices=options("params.condition"), value=[]),
                gr.Dropdown(choices=[MEAN, *seeds_of(runs)], value=MEAN),
                gr.Dropdown(choices=[ALL_JUDGES, *judges], value=ALL_JUDGES),
                gr.CheckboxGroup(choices=available_sets(runs, study_name) if not runs.empty else [], value=[]),
                gr.Dropdown(choices=charts, value=chart_metric),
                *shown_runs(study_name, sweep_name, [], [], [], MEAN, ALL_JUDGES, [], chart_metric))

    def study_view(study_name: str, current: str | None = None):
        """The whole view of a study: its sweeps (the current one if it has it), the published rows box, and the
        chosen sweep's view."""
        names, value = pick_sweep(study_name, current)
        return gr.Dropdown(choices=names, value=value), rows_box(study_name), *sweep_view(study_name, value)

    filters = [study, sweep, models, setting, condition, seed, judge, sets, shown, published]
    outputs = [table, note, download, plot]
    sweep_outputs = [models, setting, condition, seed, judge, sets, shown, *outputs]
    # One event per user action, each drawing the whole view it changes, one at a time in the order sent: a study or
    # sweep switch replaces the filters and the table together, and a filter changed while the table is being drawn
    # is drawn again with every control's value once that is done (always_last; Gradio's default for a click or an
    # input drops it, so a second box ticked meanwhile stayed ticked with its columns missing). Programmatic updates
    # of the controls trigger nothing (`.input`, not `.change`).
    serial = {"concurrency_limit": 1, "concurrency_id": "runs-view", "trigger_mode": "always_last"}
    gr.on([study.input, refresh.click, demo.load], study_view, [study, sweep], [sweep, published, *sweep_outputs],
          **serial)
    sweep.input(sweep_view, [study, sweep], sweep_outputs, **serial)
    # Each control redraws what depends on it: the rows' filters everything, a column set or the published rows the
    # table (the CSV holds every set, the chart one headline), the chart's number the chart.
    gr.on([control.input for control in (models, setting, condition, seed, judge)], shown_runs, filters, outputs,
          **serial)
    gr.on([sets.input, published.input], shown_table_only, filters, [table, note], **serial)
    shown.input(shown_chart, [study, sweep, models, setting, condition, shown], [plot], **serial)
    return {"study": study, "sweep": sweep, "table": table, "refresh": refresh}
