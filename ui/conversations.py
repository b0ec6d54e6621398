"""Conversations tab (incremental delivery): a task's shards with the reply after each turn, and the final stories
of two conditions side by side with the checklist result of each requirement.

Reads each cell run's `conversations.json` table (story_id, seed, turn, final, user, reply, ...) and its
`score_records.json` artifact (score records with per-requirement adherence); either may be absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from narrative_eval.reports.judge_checks import judge_warning
from narrative_eval.reports.labels import label
from narrative_eval.studies import incremental
from narrative_eval.studies.incremental.vocabulary import SHARDED
from narrative_eval.study import experiment_of
from ui.common import (AppSettings, cell_runs, column, esc, failed_judge_checks, filter_runs, pick_sweep, run_artifact,
                       run_table, texts)

STUDY = experiment_of(incremental.NAME)
TABLE = "conversations.json"
SCORES = "score_records.json"
SCORE_CLASS = {1.0: "met", 0.5: "partial", 0.0: "missed"}


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1")


def _runs(sweep: str | None, model: str | None, setting: str | None) -> pd.DataFrame:
    return filter_runs(cell_runs(STUDY, sweep), model, setting)


def _constraints(run_id: str, repo: Path) -> dict[str, list[dict[str, Any]]]:
    """story_id -> constraints, from the constraints file named in the run's cell spec, else the
    constraints.jsonl next to its tasks file (when it still exists)."""
    spec = run_artifact(run_id, "cell_spec.json") or {}
    path = (spec.get("extra") or {}).get("constraints")
    if not path and spec.get("data_path"):
        path = str(Path(spec["data_path"]).parent / "constraints.jsonl")
    if not path:
        return {}
    resolved = Path(path) if Path(path).is_absolute() else repo / path
    if not resolved.exists():
        return {}
    out = {}
    for line in resolved.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["story_id"]] = record.get("constraints", [])
    return out


def _final(table: pd.DataFrame, story: str, seed: Any) -> str:
    if table.empty:
        return ""
    rows = table[(table["story_id"] == story) & (table["seed"].astype(str) == str(seed))]
    finals = rows[rows["final"].map(_truthy)] if "final" in rows.columns else rows.tail(1)
    return str(finals.iloc[-1]["reply"]) if not finals.empty else ""


def _checklist(run_id: str, story: str, constraints: list[dict[str, Any]]) -> str:
    records = [r for r in (run_artifact(run_id, SCORES) or []) if r.get("story_id") == story]
    if not records:
        return "<i>no score records</i>"
    record = records[0]
    scores = {item.get("constraint_id"): item.get("score") for item in record.get("adherence", [])}
    texts_by_id = {c.get("constraint_id"): c.get("requirement", "") for c in constraints}
    items = []
    for constraint_id, score in scores.items():
        status = SCORE_CLASS.get(float(score), "partial") if score is not None else "missed"
        items.append(f"<li class='req {status}'><b>{esc(score)}</b> {esc(texts_by_id.get(constraint_id, constraint_id))}</li>")
    quality = ", ".join(f"{esc(label(k))} {esc(v if v is not None else 'N/A')}" for k, v in (record.get("quality") or {}).items())
    return f"<div class='meta'>judge {esc(record.get('judge'))} · {quality}</div><ul class='checklist'>{''.join(items)}</ul>"


def _with_code(text: str) -> str:
    """Escaped text whose `backticked` parts (commands) are shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def side_by_side(sweep: str | None, model: str | None, setting: str | None, story: str | None, seed: Any, app: AppSettings) -> str:
    runs = _runs(sweep, model, setting)
    if runs.empty or not story:
        return f"<div class='empty'>{_with_code(texts()['no_runs'] if sweep else texts()['no_conversations'])}</div>"
    columns = []
    for _, run in runs.iterrows():
        condition = run.get("params.condition", "?")
        table = run_table(run["run_id"], TABLE)
        constraints = _constraints(run["run_id"], app.repo).get(story, [])
        story_text = _final(table, story, seed) or "(no final reply)"
        columns.append(f"<div class='card'><div class='card-title'>{esc(str(condition).upper())}</div>"
                       f"<div class='story'>{esc(story_text)}</div>{_checklist(run['run_id'], story, constraints)}</div>")
    failed: dict[str, set[str]] = {}
    for _, run in runs.iterrows():
        for judge, checks in failed_judge_checks(run).items():
            failed.setdefault(judge, set()).update(checks)
    warnings = "".join(f"<div class='meta judge-check-failed'>{esc(judge_warning(judge, sorted(checks)))}</div>"
                       for judge, checks in failed.items())
    return f"{warnings}<div class='side-by-side'>{''.join(columns)}</div>"


def conversation(sweep, model, setting, condition, story, seed) -> list[dict[str, str]]:
    runs = _runs(sweep, model, setting)
    runs = filter_runs(runs, conditions=condition)
    if runs.empty or not story:
        return []
    table = run_table(runs.iloc[0]["run_id"], TABLE)
    if table.empty:
        return []
    rows = table[(table["story_id"] == story) & (table["seed"].astype(str) == str(seed))]
    messages = []
    for _, row in rows.sort_values("turn").iterrows():
        messages.append({"role": "user", "content": f"**Turn {int(row['turn']) + 1}.** {row.get('user', '')}"})
        messages.append({"role": "assistant", "content": str(row.get("reply", ""))})
    return messages


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["conversations"])
    with gr.Row():
        sweep = gr.Dropdown([], label="Sweep (incremental-delivery)", elem_id="conv-sweep", allow_custom_value=True)
        model = gr.Dropdown([], label="Model")
        setting = gr.Dropdown([], label="System prompt")
        refresh = gr.Button("Refresh", scale=0)
    with gr.Row():
        story = gr.Dropdown([], label="Task (story id)", elem_id="conv-story")
        seed = gr.Dropdown([], label="Seed")
        condition = gr.Dropdown([], label="Conversation to read")
    chat = gr.Chatbot(label="Shards and replies", height=420, elem_id="conv-chat")
    finals = gr.HTML(elem_id="conv-finals")

    def on_refresh(current):
        names, value = pick_sweep(STUDY, current)
        return gr.Dropdown(choices=names, value=value)

    def on_sweep(sweep_name):
        runs = cell_runs(STUDY, sweep_name)
        def options(name):
            return sorted({str(v) for v in column(runs, name).dropna()}) if not runs.empty else []
        models, settings_, conditions = options("params.model_id"), options("params.prompt_setting"), options("params.condition")
        stories, seeds = set(), set()
        for run_id in (runs["run_id"] if not runs.empty else []):
            table = run_table(run_id, TABLE)
            if not table.empty:
                stories.update(table["story_id"].astype(str))
                seeds.update(table["seed"].astype(str))
        default_condition = SHARDED if SHARDED in conditions else (conditions[0] if conditions else None)
        return (gr.Dropdown(choices=models, value=models[0] if models else None),
                gr.Dropdown(choices=settings_, value=settings_[0] if settings_ else None),
                gr.Dropdown(choices=sorted(stories), value=min(stories) if stories else None),
                gr.Dropdown(choices=sorted(seeds), value=min(seeds) if seeds else None),
                gr.Dropdown(choices=conditions, value=default_condition))

    def show(sweep_name, model_, setting_, condition_, story_, seed_):
        return (conversation(sweep_name, model_, setting_, condition_, story_, seed_),
                side_by_side(sweep_name, model_, setting_, story_, seed_, app))

    refresh.click(on_refresh, [sweep], [sweep])
    sweep.change(on_sweep, [sweep], [model, setting, story, seed, condition])
    for control in (model, setting, condition, story, seed):
        control.change(show, [sweep, model, setting, condition, story, seed], [chat, finals])
    demo.load(on_refresh, [sweep], [sweep]).then(show, [sweep, model, setting, condition, story, seed], [chat, finals])
    return {"sweep": sweep, "chat": chat, "finals": finals}
