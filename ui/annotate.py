"""Annotate tab: blinded pointwise (five 1-5 ratings) and pairwise (five-level preference) rating of stored fills.

The page never holds a run id, model or prompt: it shows the passage and the fill(s), and keeps only the
opaque item id and the A/B order in server-side state. Ratings go straight to the annotation store.
"""

from __future__ import annotations

import math
import random
import re
import time
from functools import partial
from typing import Any

import gradio as gr
import pandas as pd

from narrative_eval import annotations
from narrative_eval.judges import load_rubric
from ui.common import (AppSettings, cell_runs, esc, instances_by_id, passage_html, pick_sweep, problem_from_messages, run_table,
                       texts, user_error)

STUDY = "infilling"
POINTWISE_RUBRIC = "infilling_narrative"
PAIRWISE_RUBRIC = "pairwise"
KINDS = ("pairwise", "pointwise")
JUDGE_SKIP = ("status", "qavg", "raw", "error")
FEW_ITEMS = 30
"""Below this many rated items an agreement figure is too uncertain to lean on."""


def verdict_labels() -> list[tuple[str, int]]:
    """(shown label, preference for A) from the pairwise rubric, strongest preference for A first."""
    verdicts = load_rubric(PAIRWISE_RUBRIC).verdicts
    return sorted(((label.replace("_", " "), int(value)) for label, value in verdicts.items()), key=lambda p: -p[1])


def dimensions() -> list[tuple[str, str]]:
    return [(d.key, d.label) for d in load_rubric(POINTWISE_RUBRIC).dimensions]


def scale_descriptions() -> dict[str, str]:
    """What the scale points of each dimension mean, as the judge's rubric says it ('- key: what. 1 ...; 5 ...')."""
    rubric = load_rubric(POINTWISE_RUBRIC)
    found = {}
    for key, _ in dimensions():
        match = re.search(rf"^\s*-\s*{re.escape(key)}\s*:\s*(.+)$", rubric.system or "", re.MULTILINE)
        if match:
            found[key] = match.group(1).strip()
    return found


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


def _source(run: pd.Series, row: pd.Series) -> dict[str, Any]:
    trace_id = row.get("trace_id")
    return {"run_id": run["run_id"], "model": run.get("params.model_id"), "prompt_setting": run.get("params.prompt_setting"),
            "condition": run.get("params.condition"), "trace_id": trace_id if isinstance(trace_id, str) else None}


def _groups(sweep: str, kind: str) -> list[list[tuple[pd.Series, pd.Series]]]:
    """Every ratable output (pointwise) or pair of outputs of one blank (pairwise) of the sweep, in canonical order."""
    runs = cell_runs(STUDY, sweep)
    if runs.empty:
        return []
    by_key: dict[tuple[str, int], list[tuple[pd.Series, pd.Series]]] = {}
    for _, run in runs.iterrows():
        for _, row in _answered(run["run_id"]).iterrows():
            by_key.setdefault((row["instance_id"], int(row["seed"])), []).append((run, row))
    groups: list[list[tuple[pd.Series, pd.Series]]] = []
    for outputs in by_key.values():
        if kind == "pointwise":
            groups.extend([[output] for output in outputs])
        else:
            groups.extend([[a, b] for i, a in enumerate(outputs) for b in outputs[i + 1:]])
    return [sorted(group, key=lambda pair: pair[0]["run_id"]) for group in groups]  # canonical order: by run id


def _item_id(sweep: str, kind: str, group: list[tuple[pd.Series, pd.Series]]) -> str:
    instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
    return annotations.item_key(kind, sweep, instance_id, seed, [run["run_id"] for run, _ in group])


def rating_progress(store: annotations.AnnotationStore, sweep: str, kind: str, rater: str) -> tuple[int, int]:
    """(items of this sweep and mode the rater has rated, items there are)."""
    ids = {_item_id(sweep, kind, group) for group in _groups(sweep, kind)}
    return len(ids & store.rated_item_ids(rater)), len(ids)


def next_item(store: annotations.AnnotationStore, sweep: str, kind: str, rater: str, rng: random.Random) -> annotations.AnnotationItem | None:
    """A random item of the sweep this rater has not rated yet (stored before it is shown)."""
    done = store.rated_item_ids(rater)
    candidates = _groups(sweep, kind)
    rng.shuffle(candidates)
    for group in candidates:
        item_id = _item_id(sweep, kind, group)
        if item_id in done:
            continue
        instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
        run0, row0 = group[0]
        instance = instances_by_id(run0.get("params.data_path") or "").get(instance_id)
        context = instance.problem if instance is not None else problem_from_messages(row0.get("messages"))
        item = annotations.AnnotationItem(
            item_id=item_id, kind=kind, study=STUDY, sweep=sweep, instance_id=instance_id, seed=seed, context=context,
            outputs=tuple(str(row["answer"]) for _, row in group), sources=tuple(_source(run, row) for run, row in group),
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


def agreement_tables(store: annotations.AnnotationStore, judge: str | None) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Human-judge agreement tables, and a warning when they rest on fewer than FEW_ITEMS items."""
    keys = [key for key, _ in dimensions()]
    if not judge:
        return pd.DataFrame(), pd.DataFrame(), ""
    pointwise_rows = annotations.pointwise_agreement(store, judge, keys)
    pairwise_row = annotations.pairwise_agreement(store, judge, keys)
    counts = [row.get("n", 0) for row in pointwise_rows] + [pairwise_row.get("n", 0)]
    rated = max(counts) if counts else 0
    warning = (f"⚠ These figures rest on {rated} rated item(s); below {FEW_ITEMS} they are too uncertain to lean on "
               "(rate more items first)." if rated < FEW_ITEMS else "")
    return pd.DataFrame(pointwise_rows).round(3), pd.DataFrame([pairwise_row]).round(3), warning


def show_next(store: annotations.AnnotationStore, rater_: str, kind_: str, sweep_: str | None) -> list:
    """The next unrated item for this rater, the rating counter, and cleared inputs."""
    rater_ = (rater_ or "").strip()
    if not rater_:
        raise user_error("Type your name first: ratings are kept per rater.")
    if not sweep_:
        raise user_error("Pick a sweep.")
    rng = random.Random()
    item = next_item(store, sweep_, kind_, rater_, rng)
    resets = [gr.Radio(value=None) for _ in dimensions()] + [gr.Radio(value=None)]
    rated, total = rating_progress(store, sweep_, kind_, rater_)
    count = f"**{rated} of {total}** {kind_} items of this sweep rated by {esc(rater_)}."
    if item is None:
        return [None, "<div class='empty'>Nothing left to rate in this sweep for you.</div>", "", count, *resets]
    order = (0, 1) if item.kind == "pointwise" else tuple(rng.sample([0, 1], 2))
    state = {"item_id": item.item_id, "order": order, "shown_at": time.time(), "kind": item.kind}
    return [state, item_html(item, order), "", count, *resets]


def save_rating(store: annotations.AnnotationStore, state, rater_: str, preference_: str | None, *scores) -> tuple:
    """Store the rating of the item shown; clears the state so the next item may follow."""
    rater_ = (rater_ or "").strip()
    if not state:
        raise user_error("Press 'Next item' first.")
    if not rater_:
        raise user_error("Type your name first.")
    seconds = time.time() - state["shown_at"]
    if state["kind"] == "pairwise":
        if not preference_:
            raise user_error("Choose a preference.")
        shown = dict(verdict_labels())[preference_]
        rating = annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pairwise", shown_order=tuple(state["order"]),
                                    preference=annotations.canonical_preference(shown, state["order"]),
                                    label=preference_.replace(" ", "_"), seconds=seconds)
    else:
        if any(s is None for s in scores):
            raise user_error("Rate all five dimensions.")
        rating = annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pointwise", shown_order=(0,),
                                    scores={key: int(s) for (key, _), s in zip(dimensions(), scores)}, seconds=seconds)
    store.save_rating(rating)
    _rating_as_feedback(store.item(state["item_id"]), rating)
    counts = store.counts().get(rater_, {})
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return None, f"Saved. {esc(rater_)} has rated {summary} in all."


def _rating_as_feedback(item: annotations.AnnotationItem, rating: annotations.Rating) -> None:
    """The rating also goes onto the rated generations' MLflow traces, as feedback from a human source
    (pairwise: each output's preference from its own side, +2 clearly better ... -2 clearly worse)."""
    from narrative_eval.tracing import log_human_feedback

    traces = [source.get("trace_id") for source in item.sources]
    if rating.kind == "pointwise" and traces and traces[0]:
        for key, score in (rating.scores or {}).items():
            log_human_feedback(traces[0], f"human/{key}", score, rating.rater)
    elif rating.kind == "pairwise" and len(traces) == 2 and rating.preference is not None:
        for trace_id, sign in zip(traces, (1, -1)):
            if trace_id:
                log_human_feedback(trace_id, "human/preference", sign * rating.preference, rating.rater)


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
        described = scale_descriptions()
        sliders = [gr.Radio([1, 2, 3, 4, 5], label=label, info=described.get(key), elem_id=f"annotate-{key}")
                   for key, label in dimensions()]
    with gr.Group(visible=True) as pairwise_group:
        preference = gr.Radio([label for label, _ in verdict_labels()], label="Which fill is better?",
                              elem_id="annotate-preference")
    auto = gr.Checkbox(True, label="Show the next item after each rating", elem_id="annotate-auto")
    submit = gr.Button("Submit rating", elem_id="annotate-submit")
    message = gr.Markdown(elem_id="annotate-message")
    counter = gr.Markdown(elem_id="annotate-progress")
    current = gr.State(None)
    with gr.Accordion("Agreement with the judge", open=False):
        with gr.Row():
            judge = gr.Dropdown([], label="Judge", allow_custom_value=True)
            compute = gr.Button("Compute", scale=0)
        pointwise_table = gr.Dataframe(pd.DataFrame({"dimension": []}), label="Pointwise: human vs judge per dimension",
                                       interactive=False)
        pairwise_table = gr.Dataframe(pd.DataFrame({"judge": []}), label="Pairwise: direction of preference",
                                      interactive=False)
        few = gr.Markdown(elem_id="annotate-few")

    def on_refresh(current_sweep):
        names, value = pick_sweep(STUDY, current_sweep)
        return gr.Dropdown(choices=names, value=value)

    def on_kind(kind_):
        return gr.Group(visible=kind_ == "pointwise"), gr.Group(visible=kind_ == "pairwise")

    def on_agreement_open():
        ids = annotations.judge_ids(store)
        return gr.Dropdown(choices=ids, value=ids[0] if ids else None)

    refresh_sweep = demo.load(on_refresh, [sweep], [sweep])
    kind.change(on_kind, [kind], [pointwise_group, pairwise_group])
    next_outputs = [current, view, message, counter, *sliders, preference]
    next_button.click(partial(show_next, store), [rater, kind, sweep], next_outputs)

    def advance(auto_, rater_, kind_, sweep_, state, message_):
        if not auto_ or state is not None:  # state is cleared only by a saved rating
            return [gr.skip()] * len(next_outputs)
        shown = show_next(store, rater_, kind_, sweep_)
        shown[2] = message_  # keep 'Saved ...' above the next item
        return shown

    submit.click(partial(save_rating, store), [current, rater, preference, *sliders], [current, message]).success(
        advance, [auto, rater, kind, sweep, current, message], next_outputs).then(on_agreement_open, None, [judge])
    compute.click(lambda j: agreement_tables(store, j), [judge], [pointwise_table, pairwise_table, few])
    refresh_sweep.then(on_agreement_open, None, [judge])
    return {"rater": rater, "next": next_button, "submit": submit}
