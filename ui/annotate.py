"""Annotate tab: blinded pointwise (five 1-5 ratings) and pairwise (five-level preference) rating of stored fills.

The page never holds a run id, model or prompt: it shows the passage and the fill(s), and keeps only the
opaque item id and the A/B order in server-side state. Ratings go straight to the annotation store.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

import gradio as gr
import pandas as pd

from narrative_eval import annotations
from narrative_eval.judges import load_rubric
from ui.common import AppSettings, cell_runs, esc, instances_by_id, passage_html, pick_sweep, problem_from_messages, run_table, texts

STUDY = "infilling"
POINTWISE_RUBRIC = "infilling_narrative"
PAIRWISE_RUBRIC = "pairwise"
KINDS = ("pairwise", "pointwise")
JUDGE_SKIP = ("status", "qavg", "raw", "error")


def verdict_labels() -> list[tuple[str, int]]:
    """(shown label, preference for A) from the pairwise rubric, strongest preference for A first."""
    verdicts = load_rubric(PAIRWISE_RUBRIC).verdicts
    return sorted(((label.replace("_", " "), int(value)) for label, value in verdicts.items()), key=lambda p: -p[1])


def dimensions() -> list[tuple[str, str]]:
    return [(d.key, d.label) for d in load_rubric(POINTWISE_RUBRIC).dimensions]


def _judge_scores(row: pd.Series) -> dict[str, dict[str, float | None]]:
    scores: dict[str, dict[str, float | None]] = {}
    for name in row.index:
        parts = name.split("/")
        if len(parts) == 3 and parts[0] == "judge" and parts[2] not in JUDGE_SKIP:
            value = row[name]
            try:
                value = None if value is None or math.isnan(float(value)) else float(value)
            except (TypeError, ValueError):
                value = None
            scores.setdefault(parts[1], {})[parts[2]] = value
    return scores


def _answered(run_id: str) -> pd.DataFrame:
    table = run_table(run_id)
    if table.empty or "answer" not in table.columns:
        return table
    return table[table["answer"].map(lambda a: isinstance(a, str) and bool(a.strip()))]


def _source(run: pd.Series) -> dict[str, Any]:
    return {"run_id": run["run_id"], "model": run.get("params.model_id"), "prompt_setting": run.get("params.prompt_setting"),
            "condition": run.get("params.condition")}


def next_item(store: annotations.AnnotationStore, sweep: str, kind: str, rater: str, rng: random.Random) -> annotations.AnnotationItem | None:
    """A random item of the sweep this rater has not rated yet (stored before it is shown)."""
    runs = cell_runs(STUDY, sweep)
    if runs.empty:
        return None
    done = store.rated_item_ids(rater)
    by_key: dict[tuple[str, int], list[tuple[pd.Series, pd.Series]]] = {}
    for _, run in runs.iterrows():
        for _, row in _answered(run["run_id"]).iterrows():
            by_key.setdefault((row["instance_id"], int(row["seed"])), []).append((run, row))
    candidates: list[list[tuple[pd.Series, pd.Series]]] = []
    for outputs in by_key.values():
        if kind == "pointwise":
            candidates.extend([[output] for output in outputs])
        else:
            candidates.extend([[a, b] for i, a in enumerate(outputs) for b in outputs[i + 1:]])
    rng.shuffle(candidates)
    for group in candidates:
        group = sorted(group, key=lambda pair: pair[0]["run_id"])  # canonical order: by run id
        instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
        item_id = annotations.item_key(kind, sweep, instance_id, seed, [run["run_id"] for run, _ in group])
        if item_id in done:
            continue
        run0, row0 = group[0]
        instance = instances_by_id(run0.get("params.data_path") or "").get(instance_id)
        context = instance.problem if instance is not None else problem_from_messages(row0.get("messages"))
        item = annotations.AnnotationItem(
            item_id=item_id, kind=kind, study=STUDY, sweep=sweep, instance_id=instance_id, seed=seed, context=context,
            outputs=tuple(str(row["answer"]) for _, row in group), sources=tuple(_source(run) for run, _ in group),
            judge_scores=tuple(_judge_scores(row) for _, row in group),
        )
        store.add_item(item)
        return item
    return None


def item_html(item: annotations.AnnotationItem, order: tuple[int, ...]) -> str:
    if item.kind == "pointwise":
        return (f"<div class='card'><div class='card-title'>Item {esc(item.item_id[:6])}</div>"
                f"{passage_html(item.context, item.outputs[0], 'fill fill-0')}</div>")
    cards = []
    for slot, (position, output) in enumerate(zip("AB", order)):
        filled = passage_html(item.context, item.outputs[output], f"fill fill-{slot}")
        cards.append(f"<div class='card'><div class='card-title'>Fill {position}</div>{filled}</div>")
    return (f"<div class='card'><div class='card-title'>Item {esc(item.item_id[:6])}: the passage</div>"
            f"{passage_html(item.context, None)}</div><div class='side-by-side'>{''.join(cards)}</div>")


def agreement_tables(store: annotations.AnnotationStore, judge: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = [key for key, _ in dimensions()]
    if not judge:
        return pd.DataFrame(), pd.DataFrame()
    pointwise = pd.DataFrame(annotations.pointwise_agreement(store, judge, keys)).round(3)
    pairwise = pd.DataFrame([annotations.pairwise_agreement(store, judge, keys)]).round(3)
    return pointwise, pairwise


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    store = annotations.AnnotationStore(app.annotations_path)
    gr.Markdown(texts()["annotate"])
    with gr.Row():
        rater = gr.Textbox("", label="Your name (rater)", elem_id="annotate-rater")
        kind = gr.Radio(list(KINDS), value=KINDS[0], label="Mode", elem_id="annotate-mode")
        sweep = gr.Dropdown([], label="Sweep (infilling)", elem_id="annotate-sweep", allow_custom_value=True)
        next_button = gr.Button("Next item", variant="primary", scale=0, elem_id="annotate-next")
    view = gr.HTML(elem_id="annotate-item")
    with gr.Group(visible=False) as pointwise_group:
        sliders = [gr.Radio([1, 2, 3, 4, 5], label=label, elem_id=f"annotate-{key}") for key, label in dimensions()]
    with gr.Group(visible=True) as pairwise_group:
        preference = gr.Radio([label for label, _ in verdict_labels()], label="Which fill is better?",
                              elem_id="annotate-preference")
    submit = gr.Button("Submit rating", elem_id="annotate-submit")
    message = gr.Markdown(elem_id="annotate-message")
    current = gr.State(None)
    with gr.Accordion("Agreement with the judge", open=False):
        with gr.Row():
            judge = gr.Dropdown([], label="Judge", allow_custom_value=True)
            compute = gr.Button("Compute", scale=0)
        pointwise_table = gr.Dataframe(pd.DataFrame({"dimension": []}), label="Pointwise: human vs judge per dimension",
                                       interactive=False)
        pairwise_table = gr.Dataframe(pd.DataFrame({"judge": []}), label="Pairwise: direction of preference",
                                      interactive=False)

    def on_refresh(current_sweep):
        names, value = pick_sweep(STUDY, current_sweep)
        return gr.Dropdown(choices=names, value=value)

    def on_kind(kind_):
        return gr.Group(visible=kind_ == "pointwise"), gr.Group(visible=kind_ == "pairwise")

    def on_next(rater_, kind_, sweep_):
        rater_ = (rater_ or "").strip()
        if not rater_:
            raise gr.Error("Type your name first: ratings are kept per rater.")
        if not sweep_:
            raise gr.Error("Pick a sweep.")
        rng = random.Random()
        item = next_item(store, sweep_, kind_, rater_, rng)
        resets = [gr.Radio(value=None) for _ in sliders] + [gr.Radio(value=None)]
        if item is None:
            return [None, "<div class='empty'>Nothing left to rate in this sweep for you.</div>", "", *resets]
        order = (0, 1) if item.kind == "pointwise" else tuple(rng.sample([0, 1], 2))
        state = {"item_id": item.item_id, "order": order, "shown_at": time.time(), "kind": item.kind}
        return [state, item_html(item, order), "", *resets]

    def on_submit(state, rater_, preference_, *scores):
        rater_ = (rater_ or "").strip()
        if not state:
            raise gr.Error("Press 'Next item' first.")
        if not rater_:
            raise gr.Error("Type your name first.")
        seconds = time.time() - state["shown_at"]
        if state["kind"] == "pairwise":
            if not preference_:
                raise gr.Error("Choose a preference.")
            shown = dict(verdict_labels())[preference_]
            rating = annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pairwise", shown_order=tuple(state["order"]),
                                        preference=annotations.canonical_preference(shown, state["order"]),
                                        label=preference_.replace(" ", "_"), seconds=seconds)
        else:
            if any(s is None for s in scores):
                raise gr.Error("Rate all five dimensions.")
            rating = annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pointwise", shown_order=(0,),
                                        scores={key: int(s) for (key, _), s in zip(dimensions(), scores)}, seconds=seconds)
        store.save_rating(rating)
        counts = store.counts().get(rater_, {})
        summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        return None, f"Saved. {esc(rater_)} has rated {summary}. Press **Next item** to continue."

    def on_agreement_open():
        ids = annotations.judge_ids(store)
        return gr.Dropdown(choices=ids, value=ids[0] if ids else None)

    refresh_sweep = demo.load(on_refresh, [sweep], [sweep])
    kind.change(on_kind, [kind], [pointwise_group, pairwise_group])
    next_button.click(on_next, [rater, kind, sweep], [current, view, message, *sliders, preference])
    submit.click(on_submit, [current, rater, preference, *sliders], [current, message]).then(on_agreement_open, None, [judge])
    compute.click(lambda j: agreement_tables(store, j), [judge], [pointwise_table, pairwise_table])
    refresh_sweep.then(on_agreement_open, None, [judge])
    return {"rater": rater, "next": next_button, "submit": submit}
