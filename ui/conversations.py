"""A study's conversations tab (the incremental-delivery study's Conversations, from its `ConversationView`): a
conversation's user turns with the reply after each, and the final replies of each condition side by side with the
checklist result of each requirement. The view says which table its runs log and how a final reply's checklist
reads (narrative_eval.studies.viewers); this module lays it out."""

from __future__ import annotations

import re
from typing import Any

import gradio as gr
import pandas as pd

from narrative_eval.reports.judge_checks import judge_warning
from narrative_eval.studies.viewers import Checklist, ConversationView
from narrative_eval.study import Study
from ui.common import (AppSettings, cell_runs, column, esc, failed_judge_checks, filter_runs, pick_sweep, run_table,
                       texts)

SCORE_CLASS = {1.0: "met", 0.5: "partial", 0.0: "missed"}


def is_final(value: Any) -> bool:
    """Whether a conversations row's `final` cell marks a conversation's last turn."""
    return value is True or str(value).lower() in ("true", "1")


def _rows(view: ConversationView, table: pd.DataFrame, item: str, seed: Any) -> pd.DataFrame:
    return table[(table[view.item_column] == item) & (table["seed"].astype(str) == str(seed))]


def _final(view: ConversationView, table: pd.DataFrame, item: str, seed: Any) -> str:
    if table.empty:
        return ""
    rows = _rows(view, table, item, seed)
    finals = rows[rows["final"].map(is_final)] if "final" in rows.columns else rows.tail(1)
    return str(finals.iloc[-1]["reply"]) if not finals.empty else ""


def checklist_html(found: Checklist | None) -> str:
    if found is None:
        return "<i>no score records</i>"
    items = []
    for requirement in found.requirements:
        score = requirement.score
        status = SCORE_CLASS.get(float(score), "partial") if score is not None else "missed"
        items.append(f"<li class='req {status}'><b>{esc(score)}</b> {esc(requirement.text)}</li>")
    quality = ", ".join(f"{esc(name)} {esc(value if value is not None else 'N/A')}" for name, value in found.quality)
    return f"<div class='meta'>judge {esc(found.judge)} · {quality}</div><ul class='checklist'>{''.join(items)}</ul>"


def _with_code(text: str) -> str:
    """Escaped text whose `backticked` parts (commands) are shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def side_by_side(study: Study, view: ConversationView, sweep: str | None, model: str | None, setting: str | None,
                 item: str | None, seed: Any, app: AppSettings) -> str:
    runs = filter_runs(cell_runs(study.experiment, sweep), model, setting)
    if runs.empty or not item:
        return f"<div class='empty'>{_with_code(texts()['no_runs'] if sweep else view.empty)}</div>"
    columns = []
    for _, run in runs.iterrows():
        condition = run.get("params.condition", "?")
        reply = _final(view, run_table(run["run_id"], view.table), item, seed) or "(no final reply)"
        columns.append(f"<div class='card'><div class='card-title'>{esc(str(condition).upper())}</div>"
                       f"<div class='story'>{esc(reply)}</div>"
                       f"{checklist_html(view.checklist(run['run_id'], item, app.repo))}</div>")
    failed: dict[str, set[str]] = {}
    for _, run in runs.iterrows():
        for judge, checks in failed_judge_checks(run).items():
            failed.setdefault(judge, set()).update(checks)
    warnings = "".join(f"<div class='meta judge-check-failed'>{esc(judge_warning(judge, sorted(checks)))}</div>"
                       for judge, checks in failed.items())
    return f"{warnings}<div class='side-by-side'>{''.join(columns)}</div>"


def conversation(study: Study, view: ConversationView, sweep, model, setting, condition, item, seed) -> list[dict[str, str]]:
    runs = filter_runs(cell_runs(study.experiment, sweep), model, setting, condition)
    if runs.empty or not item:
        return []
    table = run_table(runs.iloc[0]["run_id"], view.table)
    if table.empty:
        return []
    messages = []
    for _, row in _rows(view, table, item, seed).sort_values("turn").iterrows():
        messages.append({"role": "user", "content": f"**Turn {int(row['turn']) + 1}.** {row.get('user', '')}"})
        messages.append({"role": "assistant", "content": str(row.get("reply", ""))})
    return messages


def build(app: AppSettings, demo: gr.Blocks, study: Study, view: ConversationView) -> dict[str, gr.components.Component]:
    gr.Markdown(view.intro)
    with gr.Row():
        sweep = gr.Dropdown([], label=f"Sweep ({study.experiment})", elem_id=f"{view.prefix}-sweep",
                            allow_custom_value=True)
        model = gr.Dropdown([], label="Model")
        setting = gr.Dropdown([], label=view.setting_label)
        refresh = gr.Button("Refresh", scale=0)
    with gr.Row():
        item = gr.Dropdown([], label=view.item_label, elem_id=f"{view.prefix}-story")
        seed = gr.Dropdown([], label="Seed")
        condition = gr.Dropdown([], label="Conversation to read", elem_id=f"{view.prefix}-condition")
    chat = gr.Chatbot(label="Turns and replies", height=420, elem_id=f"{view.prefix}-chat",
                      elem_classes=["conversation-chat"])
    finals = gr.HTML(elem_id=f"{view.prefix}-finals")

    def show(sweep_name, model_, setting_, condition_, item_, seed_):
        return (conversation(study, view, sweep_name, model_, setting_, condition_, item_, seed_),
                side_by_side(study, view, sweep_name, model_, setting_, item_, seed_, app))

    def sweep_view(sweep_name):
        """The whole view of a sweep: its choices, each set to its first, and the conversation and stories they
        name, drawn from those same values."""
        runs = cell_runs(study.experiment, sweep_name)

        def options(name):
            return sorted({str(v) for v in column(runs, name).dropna()}) if not runs.empty else []

        models, settings_, conditions = options("params.model_id"), options("params.prompt_setting"), options("params.condition")
        items, seeds = set(), set()
        for run_id in (runs["run_id"] if not runs.empty else []):
            table = run_table(run_id, view.table)
            if not table.empty:
                items.update(table[view.item_column].astype(str))
                seeds.update(table["seed"].astype(str))
        first = view.default_condition if view.default_condition in conditions else (conditions[0] if conditions else None)
        chosen = (models[0] if models else None, settings_[0] if settings_ else None, min(items) if items else None,
                  min(seeds) if seeds else None, first)
        lists = (models, settings_, sorted(items), sorted(seeds), conditions)
        model_, setting_, item_, seed_, condition_ = chosen
        return (*(gr.Dropdown(choices=names, value=value) for names, value in zip(lists, chosen, strict=True)),
                *show(sweep_name, model_, setting_, condition_, item_, seed_))

    def study_view(current):
        """The study's sweeps (the current one if it still exists) and the chosen sweep's whole view."""
        names, value = pick_sweep(study.experiment, current)
        return gr.Dropdown(choices=names, value=value), *sweep_view(value)

    picks = [model, setting, item, seed, condition]
    shown = [chat, finals]
    # One event per user action, one at a time in the order sent, each drawing the view from the values it sets or
    # reads: the page's load and a sweep's choices used to start a `show` each (the load's read the pickers before
    # they were filled, and could finish last: the FULL conversation under "sharded"). A pick changed while the view
    # is being drawn is drawn again once that is done (always_last); programmatic updates trigger nothing (`.input`).
    serial = {"concurrency_limit": 1, "concurrency_id": f"{view.prefix}-view", "trigger_mode": "always_last"}
    gr.on([refresh.click, demo.load], study_view, [sweep], [sweep, *picks, *shown], **serial)
    sweep.input(sweep_view, [sweep], [*picks, *shown], **serial)
    gr.on([control.input for control in picks], show, [sweep, model, setting, condition, item, seed], shown, **serial)
    return {"sweep": sweep, "chat": chat, "finals": finals}
