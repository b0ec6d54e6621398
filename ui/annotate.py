"""Annotate tab: blinded pointwise (five 1-5 ratings) and pairwise (five-level preference) rating of stored fills,
beside every other single-turn study's outputs (ui.annotate_outputs, one sub-tab per study, from its declaration) and
the stories of an incremental-delivery sweep (ui.annotate_stories), under one rater name.

The page never holds a run id, model or prompt: it shows the passage and the fill(s), and keeps only the
opaque item id and the A/B order in server-side state. Ratings go straight to the annotation store.

Pointwise fills come in the rate-next order (annotations.rate_next: within each cell, more of the fills the judges
are least sure of, drawn with known probabilities that each rating keeps), and under the form each cell's
stratified PPI++ interval of its mean human rating narrows as ratings are saved; the rating plan says how many
more ratings each cell needs for a target width.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from narrative_eval import annotations
from narrative_eval.judges import load_rubric
from narrative_eval.studies import infilling
from narrative_eval.studies.infilling import vocabulary as infilling_words
from narrative_eval.studies.infilling.annotation import Output, fill_groups, fill_item, fill_item_id
from narrative_eval.studies.infilling.report import anchored_sweep
from narrative_eval.studies.live import live_form
from narrative_eval.study import experiment_of, load_study
from ui import annotate_outputs, annotate_stories
from ui.annotate_common import (ItemSource, build_agreement, rate_next_groups, rating_form, rubric_dimensions,
                                save_rating, scale_descriptions, show_next, where_ratings_count, wire_submit)
from ui.common import REPO, AppSettings, FieldErrors, cell_runs, esc, passage_html, run_table, texts, user_error

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


def _groups(sweep: str, kind: str) -> list[list[Output]]:
    return fill_groups(cell_runs(STUDY, sweep), run_table, kind)


def _make_item(sweep: str, kind: str, group: list[Output]) -> annotations.AnnotationItem:
    form = live_form(load_study(infilling.NAME))
    return fill_item(STUDY, sweep, kind, group, lambda path: {item.id: item.record for item in form.items_in(REPO / path)})


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


def fill_rating(state: dict[str, Any], rater_: str, seconds: float, preference_: str | None, *scores) -> annotations.Rating:
    """The rating of a fill (pointwise: its five dimensions) or of a pair of fills (pairwise: the preference)."""
    if state["kind"] == "pairwise":
        if not preference_:
            raise user_error("Choose a preference.", "preference")
        shown = dict(verdict_labels())[preference_]
        return annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pairwise", shown_order=tuple(state["order"]),
                                  preference=annotations.canonical_preference(shown, state["order"]),
                                  label=preference_.replace(" ", "_"), seconds=seconds)
    if any(s is None for s in scores):
        raise user_error("Rate all five dimensions.", "scores")
    return annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pointwise", shown_order=(0,),
                              scores={key: int(s) for (key, _), s in zip(dimensions(), scores)}, seconds=seconds,
                              design=state.get("design") or {})


def fills() -> ItemSource:
    """The fills of an infilling sweep, as the shared rating flow reads them."""
    return ItemSource(_groups, fill_item_id, _make_item, item_html, len(dimensions()) + 1, "Pick a sweep.",
                      "Nothing left to rate in this sweep for you.", "Press 'Next item' first.", rate_next_groups)


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    """The rater's name, then one sub-tab for an infilling sweep's fills, one per other single-turn study for its
    outputs, and one for an incremental-delivery sweep's stories."""
    store = annotations.AnnotationStore(app.annotations_path)
    gr.Markdown(texts()["annotate"])
    rater = gr.Textbox("", label="Your name (rater)", elem_id="annotate-rater")
    rater_error = FieldErrors("annotate").box("rater")  # both halves say a missing name here
    with gr.Tabs(elem_id="annotate-what"):
        with gr.Tab("Fills (infilling)", id="annotate-fills", elem_id="annotate-fills-tab"):
            fills = _build_fills(store, demo, rater, rater_error)
        for study in annotate_outputs.rated_studies(infilling.NAME):
            with gr.Tab(annotate_outputs.tab_title(study), id=f"annotate-{study.name}",
                        elem_id=f"annotate-{study.name}-tab"):
                annotate_outputs.build(study, demo, store, rater, rater_error)
        with gr.Tab("Stories (incremental delivery)", id="annotate-stories", elem_id="annotate-stories-tab"):
            annotate_stories.build(app, demo, store, rater, rater_error)
    return {"rater": rater, **fills}


def _build_fills(store: annotations.AnnotationStore, demo: gr.Blocks, rater: gr.Textbox,
                 rater_error: gr.Markdown) -> dict[str, gr.components.Component]:
    described = scale_descriptions(POINTWISE_RUBRIC)
    source = fills()
    form = rating_form(
        demo, "annotate", STUDY, KINDS, "item",
        lambda: [gr.Radio([1, 2, 3, 4, 5], label=label, info=described.get(key), elem_id=f"annotate-{key}")
                 for key, label in dimensions()],
        lambda: [gr.Radio([label for label, _ in verdict_labels()], label="Which fill is better?",
                          elem_id="annotate-preference")], rater_error)
    judge, judges = build_agreement(store, [key for key, _ in dimensions()], STUDY, "Agreement with the judge",
                                    "Pairwise: direction of preference", "annotate", (POINTWISE_RUBRIC,))
    show_intervals = where_ratings_count(form, store, source, judge, texts()["annotate_intervals"],
                                         lambda sweep, path: anchored_sweep(sweep, annotations_path=path),
                                         (POINTWISE_RUBRIC,))
    next_outputs = [form.current, form.view, form.message, form.counter, *form.pointwise, *form.pairwise]
    form.next_button.click(form.errors.beside_the_fields(partial(show_next, source, store), len(next_outputs)),
                           [rater, form.kind, form.sweep], [*next_outputs, *form.errors.outputs])
    wire_submit(form.submit, partial(save_rating, source, fill_rating, store),
                [form.current, rater, *form.pairwise, *form.pointwise], partial(show_next, source, store),
                [rater, form.kind, form.sweep], next_outputs, form.auto, [(judges, None, [judge]), show_intervals],
                form.errors)
    form.loaded.then(judges, None, [judge]).then(*show_intervals)
    return {"next": form.next_button, "submit": form.submit}
