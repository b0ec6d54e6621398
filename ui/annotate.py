"""Annotate tab: blinded pointwise (five 1-5 ratings) and pairwise (five-level preference) rating of stored fills,
beside the stories of an incremental-delivery sweep (ui.annotate_stories), under one rater name.

The page never holds a run id, model or prompt: it shows the passage and the fill(s), and keeps only the
opaque item id and the A/B order in server-side state. Ratings go straight to the annotation store.
"""

from __future__ import annotations

import random
import time
from functools import partial
from typing import Any

import gradio as gr
import pandas as pd

from narrative_eval import annotations
from narrative_eval.judges import load_rubric
from narrative_eval.studies import infilling
from narrative_eval.studies.infilling import vocabulary as infilling_words
from narrative_eval.study import experiment_of
from ui import annotate_stories
from ui.annotate_common import (build_agreement, checked_rater, first_unrated, judge_scores_of, progress_line, rating_as_feedback,
                                rating_form, rubric_dimensions, saved_message, scale_descriptions, wire_submit)
from ui.common import (AppSettings, beside_the_form, cell_runs, esc, instances_by_id, passage_html, problem_from_messages, run_table, texts,
                       user_error)

STUDY = experiment_of(infilling.NAME)
POINTWISE_RUBRIC = infilling_words.RUBRIC
PAIRWISE_RUBRIC = "pairwise"
KINDS = ("pairwise", "pointwise")


def verdict_labels() -> list[tuple[str, int]]:
    """(shown label, preference for A) from the pairwise rubric, strongest preference for A first."""
    verdicts = load_rubric(PAIRWISE_RUBRIC).verdicts
    return sorted(((label.replace("_", " "), int(value)) for label, value in verdicts.items()), key=lambda p: -p[1])


def dimensions() -> list[tuple[str, str]]:
    return rubric_dimensions(POINTWISE_RUBRIC)


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


def next_item(store: annotations.AnnotationStore, sweep: str, kind: str, rater: str, rng: random.Random) -> annotations.AnnotationItem | None:
    """A random item of the sweep this rater has not rated yet (stored before it is shown)."""
    return first_unrated(store, rater, _groups(sweep, kind), partial(_item_id, sweep, kind), partial(_make_item, sweep, kind),
                         rng)


def _make_item(sweep: str, kind: str, group: list[tuple[pd.Series, pd.Series]]) -> annotations.AnnotationItem:
    instance_id, seed = group[0][1]["instance_id"], int(group[0][1]["seed"])
    run0, row0 = group[0]
    instance = instances_by_id(run0.get("params.data_path") or "").get(instance_id)
    context = instance.problem if instance is not None else problem_from_messages(row0.get("messages"))
    return annotations.AnnotationItem(
        item_id=_item_id(sweep, kind, group), kind=kind, study=STUDY, sweep=sweep, instance_id=instance_id, seed=seed,
        context=context, outputs=tuple(str(row["answer"]) for _, row in group),
        sources=tuple(_source(run, row) for run, row in group), judge_scores=tuple(judge_scores_of(row) for _, row in group),
    )


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


def show_next(store: annotations.AnnotationStore, rater_: str, kind_: str, sweep_: str | None) -> list:
    """The next unrated item for this rater, the rating counter, and cleared inputs."""
    rater_ = checked_rater(rater_)
    if not sweep_:
        raise user_error("Pick a sweep.")
    rng = random.Random()
    item = next_item(store, sweep_, kind_, rater_, rng)
    resets = [gr.Radio(value=None) for _ in dimensions()] + [gr.Radio(value=None)]
    count = progress_line(store, {_item_id(sweep_, kind_, group) for group in _groups(sweep_, kind_)}, kind_, rater_)
    if item is None:
        return [None, "<div class='empty'>Nothing left to rate in this sweep for you.</div>", "", count, *resets]
    order = (0, 1) if item.kind == "pointwise" else tuple(rng.sample([0, 1], 2))
    state = {"item_id": item.item_id, "order": order, "shown_at": time.time(), "kind": item.kind}
    return [state, item_html(item, order), "", count, *resets]


def save_rating(store: annotations.AnnotationStore, state, rater_: str, preference_: str | None, *scores) -> tuple:
    """Store the rating of the item shown; clears the state so the next item may follow."""
    if not state:
        raise user_error("Press 'Next item' first.")
    rater_ = checked_rater(rater_)
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
    rating_as_feedback(store.item(state["item_id"]), rating)
    return None, saved_message(store, rater_)


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    """The rater's name, then one sub-tab for an infilling sweep's fills and one for an incremental-delivery sweep's stories."""
    store = annotations.AnnotationStore(app.annotations_path)
    gr.Markdown(texts()["annotate"])
    rater = gr.Textbox("", label="Your name (rater)", elem_id="annotate-rater")
    with gr.Tabs(elem_id="annotate-what"):
        with gr.Tab("Fills (infilling)", id="annotate-fills", elem_id="annotate-fills-tab"):
            fills = _build_fills(store, demo, rater)
        with gr.Tab("Stories (incremental delivery)", id="annotate-stories", elem_id="annotate-stories-tab"):
            annotate_stories.build(app, demo, store, rater)
    return {"rater": rater, **fills}


def _build_fills(store: annotations.AnnotationStore, demo: gr.Blocks, rater: gr.Textbox) -> dict[str, gr.components.Component]:
    described = scale_descriptions(POINTWISE_RUBRIC)
    form = rating_form(
        demo, "annotate", STUDY, KINDS, "item",
        lambda: [gr.Radio([1, 2, 3, 4, 5], label=label, info=described.get(key), elem_id=f"annotate-{key}")
                 for key, label in dimensions()],
        lambda: [gr.Radio([label for label, _ in verdict_labels()], label="Which fill is better?",
                          elem_id="annotate-preference")])
    judge, judges = build_agreement(store, [key for key, _ in dimensions()], STUDY, "Agreement with the judge",
                                    "Pairwise: direction of preference", "annotate-few")
    next_outputs = [form.current, form.view, form.message, form.counter, *form.pointwise, *form.pairwise]
    form.next_button.click(beside_the_form(partial(show_next, store), len(next_outputs)), [rater, form.kind, form.sweep],
                           [*next_outputs, form.error])
    wire_submit(form.submit, partial(save_rating, store), [form.current, rater, *form.pairwise, *form.pointwise],
                partial(show_next, store), [rater, form.kind, form.sweep], next_outputs, form.auto, (judges, None, [judge]),
                form.error)
    form.loaded.then(judges, None, [judge])
    return {"next": form.next_button, "submit": form.submit}
