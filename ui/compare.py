"""Compare tab: one item of a single-turn study's sweep, its shown text and reference once, and each selected run's
answer beside the others (highlighted in the text: in its blank, or after it)."""

from __future__ import annotations

import math
import statistics

import gradio as gr
import pandas as pd

from narrative_eval.annotations.items import problem_from_messages
from narrative_eval.records.keys import judge_key, parse_judge_key
from narrative_eval.reports.judge_checks import judge_warning
from narrative_eval.reports.labels import label as metric_label
from narrative_eval.stats.cell_scores import JUDGE_ROW_FIELDS, row_scores
from narrative_eval.evaluation import SingleTurnStudy
from narrative_eval.studies.live import live_form, shown_field
from ui.common import (REPO, AppSettings, at_avg_metrics, at_avg_of, cell_runs, esc, failed_judge_checks,
                       judge_ids_of, mlflow_ui_available, number, passage_html, pick_sweep,
                       run_choices, run_label, run_table, single_turn_studies, study_named, sweeps, texts,
                       trace_link)

MAX_DEFAULT_RUNS = 4
HIGH_PCT = "high_pct"
"""A judge's share of fills rated above 4, per row 100 or 0."""


def judged_high(table: pd.DataFrame) -> list[bool]:
    """Per row, whether a judge rated the fill above 4: the rows High% counts (stats.cell_scores.row_scores, so a
    failed judgment counts for nothing here either)."""
    if table.empty:
        return []
    scores = row_scores(table)
    rated = [values == 100.0 for key, values in scores.items()
             if (judged := parse_judge_key(key)) is not None and judged[1] == HIGH_PCT]
    return [bool(any(column[i] for column in rated)) for i in range(len(table))]


def _seed_rows(run_id: str, seed: int | None) -> pd.DataFrame:
    table = run_table(run_id)
    if table.empty or seed is None or "seed" not in table.columns:
        return table
    return table[table["seed"].astype(int) == int(seed)]


def seeds_for(run_ids: list[str]) -> list[int]:
    found: set[int] = set()
    for run_id in run_ids:
        table = run_table(run_id)
        if "seed" in table.columns:
            found.update(int(s) for s in table["seed"].dropna().unique())
    return sorted(found)


def instance_order(study: SingleTurnStudy, run_ids: list[str], seed: int | None, by_disagreement: bool,
                   high_only: bool = False) -> list[str]:
    """Item ids in data order, or by decreasing spread of the runs' AtAvg (a missing fill counts as 0);
    with `high_only`, only instances where a judge rated some run's fill above 4 (the study's Table 17)."""
    order: list[str] = []
    scores: dict[str, list[float]] = {}
    high: set[str] = set()
    for run_id in run_ids:
        table = _seed_rows(run_id, seed)
        for (_, row), rated_high in zip(table.iterrows(), judged_high(table), strict=True):
            instance = row[study.id_column]
            if instance not in scores:
                order.append(instance)
                scores[instance] = []
            value = at_avg_of(row)
            scores[instance].append(0.0 if math.isnan(value) else value)
            if rated_high:
                high.add(instance)
    if high_only:
        order = [i for i in order if i in high]
    if by_disagreement:
        spread = {i: statistics.pstdev(v) if len(v) > 1 else 0.0 for i, v in scores.items()}
        order.sort(key=lambda i: -spread[i])
    return order


def _judge_line(row: pd.Series) -> str:
    parts = []
    for judge in judge_ids_of(list(row.index), prefix=""):
        status = row.get(judge_key(judge, "status"))
        if status and status != "ok":
            parts.append(f"{esc(judge)}: <span class='bad'>{esc(status)}</span>")
            continue
        dims = [judged[1] for name in row.index if (judged := parse_judge_key(str(name))) is not None
                and judged[0] == judge and judged[1] not in JUDGE_ROW_FIELDS]
        scores = ", ".join(f"{esc(d)} {number(row.get(judge_key(judge, d)), 0)}" for d in dims)
        parts.append(f"{esc(judge)}: QAvg <b>{number(row.get(judge_key(judge, 'qavg')), 2)}</b> ({scores})")
    return "<br>".join(parts)


def answers_name(study: SingleTurnStudy) -> str:
    """What the study's answers are called, plural: its declaration's `answers_name`, else its answer column's label."""
    return study.answers_name or f"{metric_label(study.answer_column).lower()}s"


def high_label(study: SingleTurnStudy) -> str:
    """The filter of answers a judge rated above 4, in the study's words ('Only fills ...', 'Only continuations ...')."""
    return f"Only {answers_name(study)} a judge rated above 4"


def empty_message(study: SingleTurnStudy, sweep: str | None, run_ids: list[str], high_only: bool) -> str:
    """Why there is no instance to show: no sweep, an unknown name, no finished run, none picked, or no fill rated
    above 4 under 'Only fills a judge rated above 4'."""
    words = texts()
    if not sweep:
        return words["no_sweeps"]
    if sweep not in sweeps(study.experiment):
        return words["no_sweep_named"].format(sweep=sweep, experiment=study.experiment)
    runs = cell_runs(study.experiment, sweep)
    if runs.empty:
        return words["no_runs"]
    if not run_ids:
        return words["pick_runs"]
    judges = judge_ids_of(list(runs.columns))
    if high_only and not judges:
        return words["no_judge_high"].format(answers=answers_name(study), only=high_label(study))
    if high_only:
        return words["none_rated_high"].format(judges=" or ".join(judges), answers=answers_name(study),
                                               only=high_label(study))
    return words["no_outputs"]


CONTEXT_WORDS = 8
"""Words of the passage shown either side of each run's fill: the whole passage is shown once, above the runs."""
MAX_COLUMNS = 4
"""Runs side by side on one row at 1440 px; more wrap to the next row."""


def render(study: SingleTurnStudy, sweep: str | None, run_ids: list[str], seed: int | None, instance_id: str | None,
           mlflow_ui_url: str | None = None, high_only: bool = False) -> str:
    """The item's shown text with each chosen run's answer; with `mlflow_ui_url` (an answering `mlflow ui`), each
    card links to its generation's trace."""
    runs = cell_runs(study.experiment, sweep)
    runs = runs[runs["run_id"].isin(run_ids or [])] if not runs.empty else runs
    if runs.empty or not instance_id:
        return f"<div class='empty'>{esc(empty_message(study, sweep, run_ids, high_only))}</div>"
    field = shown_field(study)
    shown, reference, meta = "", "", ""
    cards = []
    for index, (_, run) in enumerate(runs.iterrows()):
        rows = _seed_rows(run["run_id"], seed)
        rows = rows[rows[study.id_column] == instance_id] if not rows.empty else rows
        label = esc(run_label(run))
        if rows.empty:
            cards.append(f"<div class='card'><div class='card-title'>{label}</div><i>no output for this item</i></div>")
            continue
        row = rows.iloc[0]
        if not shown:
            shown, reference = _shown_text(study, row, field, run, instance_id), row.get(study.reference) or ""
            meta = " · ".join([*(f"{esc(metric_label(column))} {esc(row.get(column))}" for column in _item_columns(study, row)
                                 if column != field), f"<code>{esc(instance_id)}</code>"])
        answer = row.get(study.answer_column)
        answer = answer if isinstance(answer, str) and answer else None
        status = row.get("extraction_status")
        extraction = f"extraction: <span class='status-{esc(status)}'>{esc(status)}</span> · " if status else ""
        metrics = " · ".join(f"{esc(metric_label(m))} {number(row.get(m))}" for m in at_avg_metrics())
        cards.append(
            f"<div class='card run-card' data-model='{esc(run.get('params.model_id'))}'>"
            f"<div class='card-title'><span class='swatch s{index % 6}'></span>{label}</div>"
            f"{passage_html(shown, answer, f'fill fill-{index % 6}', placeholder='(no answer)', context_words=CONTEXT_WORDS)}"
            f"<div class='meta'>{esc(metric_label('at_avg'))} <b>{number(at_avg_of(row))}</b> · {metrics}</div>"
            f"<div class='meta'>{extraction}finish: {esc(row.get('finish_reason'))}"
            f" · tokens {esc(row.get('completion_tokens'))}</div>"
            f"<div class='meta'>{_judge_line(row)}</div>{_checks_line(run)}"
            f"<details><summary>raw reply</summary><pre>{esc(row.get('raw_reply'))}</pre></details>"
            f"{_trace_anchor(mlflow_ui_url, run, row)}</div>"
        )
    head = (f"<div class='card gold-card'><div class='card-title'>{esc(metric_label(field))} — {meta}</div>"
            f"{passage_html(shown, None)}"
            f"<div class='gold'><b>Reference ({esc(metric_label(study.reference))}):</b> {esc(reference)}</div></div>")
    columns = min(len(cards), MAX_COLUMNS)
    return (f"<div id='compare-cards'>{head}<div class='compare-columns' "
            f"style='grid-template-columns: repeat({columns}, minmax(0, 1fr))'>{''.join(cards)}</div></div>")


def _item_columns(study: SingleTurnStudy, row: pd.Series) -> list[str]:
    """What a generations row carries about its item: the columns between its id and `seed`."""
    names = list(row.index)
    return names[names.index(study.id_column) + 1: names.index("seed")] if "seed" in names else []


def _shown_text(study: SingleTurnStudy, row: pd.Series, field: str, run: pd.Series, item_id: str) -> str:
    """The item's shown text: its row's column, else the item as the study reads it from the run's data file (a study
    whose rows leave it out), else the prompt sent."""
    if isinstance(row.get(field), str):
        return row[field]
    path = run.get("params.data_path")
    items = {item.id: item for item in live_form(study).items_in(REPO / path)} if isinstance(path, str) and path else {}
    return (items[item_id].fields.get(field) if item_id in items else None) or problem_from_messages(row.get("messages"))


def _checks_line(run: pd.Series) -> str:
    """A warning under the judges' scores for each judge that failed its control checks on this run."""
    return "".join(f"<div class='meta judge-check-failed'>{esc(judge_warning(judge, checks))}</div>"
                   for judge, checks in failed_judge_checks(run).items())


def _trace_anchor(url: str | None, run, row) -> str:
    trace_id = row.get("trace_id")
    if not url or not isinstance(trace_id, str):
        return ""
    return (f"<div class='meta'><a class='trace-link' target='_blank' "
            f"href='{esc(trace_link(url, run['experiment_id'], trace_id))}'>open this generation's trace in MLflow</a></div>")


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["compare"])
    studies = list(single_turn_studies())
    with gr.Row():
        study = gr.Dropdown(studies, value=studies[0], label="Study", elem_id="compare-study")
        sweep = gr.Dropdown([], label="Sweep", elem_id="compare-sweep", allow_custom_value=True)
        seed = gr.Dropdown([], label="Seed", elem_id="compare-seed")
        disagree = gr.Checkbox(label="Most disagreement first", value=False, elem_id="compare-disagree")
        high = gr.Checkbox(label=high_label(study_named(studies[0])), value=False, elem_id="compare-high")
        refresh = gr.Button("Refresh", scale=0, elem_id="compare-refresh")
    runs = gr.CheckboxGroup([], label="Runs to compare", elem_id="compare-runs")
    with gr.Row():
        prev_button = gr.Button("◀ Previous", scale=0, elem_id="compare-prev")
        # Custom values pass: a value the list dropped while an event was on its way is drawn as empty, not refused.
        instance = gr.Dropdown([], label="Instance", elem_id="compare-instance", scale=4, allow_custom_value=True)
        next_button = gr.Button("Next ▶", scale=0, elem_id="compare-next")
    view = gr.HTML(elem_id="compare-view")

    def on_refresh(study_: str | None, current: str | None):
        chosen = study_named(study_)
        names, value = pick_sweep(chosen.experiment, current)
        return gr.Dropdown(choices=names, value=value), gr.Checkbox(label=high_label(chosen))

    def on_sweep(study_: str | None, sweep_name: str | None):
        chosen = study_named(study_)
        choices = run_choices(cell_runs(chosen.experiment, sweep_name))
        # Without runs (an unknown name, none finished yet) the view says why here: the run list may not change.
        view_ = gr.skip() if choices else f"<div class='empty'>{esc(empty_message(chosen, sweep_name, [], False))}</div>"
        return gr.CheckboxGroup(choices=choices, value=[value for _, value in choices[:MAX_DEFAULT_RUNS]]), view_

    def on_runs(run_ids: list[str], current_seed):
        seeds = seeds_for(run_ids or [])
        value = current_seed if current_seed in seeds else (seeds[0] if seeds else None)
        return gr.Dropdown(choices=seeds, value=value)

    def on_order(study_, run_ids, seed_, disagree_, high_, current):
        order = instance_order(study_named(study_), run_ids or [], seed_, disagree_, high_)
        value = current if (current in order and not disagree_) else (order[0] if order else None)
        return gr.Dropdown(choices=order, value=value)

    def step(study_, run_ids, seed_, disagree_, high_, current, delta: int):
        order = instance_order(study_named(study_), run_ids or [], seed_, disagree_, high_)
        if not order:
            return None
        index = order.index(current) if current in order else -delta
        return order[(index + delta) % len(order)]

    def show(study_, sweep_, runs_, seed_, instance_, high_):
        url = app.mlflow_ui_url if mlflow_ui_available(app.mlflow_ui_url) else None
        return render(study_named(study_), sweep_, runs_, seed_, instance_, url, high_)

    serial = {"concurrency_limit": 1, "concurrency_id": "compare-view"}
    raw = {"preprocess": False, **serial}
    # The view is drawn once the instance list fits the runs, seed and filters (an instance of the previous list
    # would be drawn, or refused, otherwise).
    # Another study lists its own sweeps (the sweep's change event then lists its runs).
    study.change(on_refresh, [study, sweep], [sweep, high])
    ordering = [study, runs, seed, disagree, high, instance]
    shown = [study, sweep, runs, seed, instance, high]
    # Refresh re-reads the runs (their tags and metrics may have changed since the view was drawn) and redraws it.
    refresh.click(on_refresh, [study, sweep], [sweep, high], **serial).then(show, shown, [view], **raw)
    # The events that lead to the view run one at a time in the order sent (one queue, shared by the pages open on the
    # app): side by side, a view drawn for the values before a click could finish after the one drawn for the click.
    # Those that read the run list take the values as the page sends them (preprocess=False): Gradio would refuse,
    # with an error in the log, a run of the previous sweep still checked in an event sent just before a new sweep
    # replaced the list. Such a run is never drawn (render keeps the chosen sweep's runs), and the seeds and instances
    # read from it are replaced by the new list's own change event, which follows.
    sweep.change(on_sweep, [study, sweep], [runs, view], **serial)
    runs.change(on_runs, [runs, seed], [seed], **raw).then(on_order, ordering, [instance], **raw).then(
        show, shown, [view], **raw)
    for control in (seed.input, disagree.change, high.change):
        control(on_order, ordering, [instance], **raw).then(show, shown, [view], **raw)
    prev_button.click(lambda t, r, s, d, h, c: step(t, r, s, d, h, c, -1), ordering, [instance], **raw)
    next_button.click(lambda t, r, s, d, h, c: step(t, r, s, d, h, c, 1), ordering, [instance], **raw)
    instance.change(show, shown, [view], **raw)
    demo.load(on_refresh, [study, sweep], [sweep, high])
    return {"study": study, "sweep": sweep, "runs": runs, "instance": instance, "view": view}
