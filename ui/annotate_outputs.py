"""Annotate tab: one sub-tab per single-turn study (the infilling study's fills have their own), built from the
study's declaration alone (studies.rating): the item shows what the study's judge sees beside the answer under the
study's labels, then the answer; the form asks for one 1-5 rating per dimension of the judge's rubric. Outputs come
in the rate-next order where judges scored them (annotations.rate_next), each cell's interval of its mean human rating
and the rating plan under the form (as the study's rating plan reads its ratings: reports.single_turn), and ratings are saved as the fills' are: in the annotation store and as human feedback on the rated
generation's MLflow trace."""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from narrative_eval import annotations
from narrative_eval.evaluation import SingleTurnStudy
from narrative_eval.studies.live import live_form
from narrative_eval.studies.rating import (answer_label, context_inputs, item_context, output_item_id, outputs,
                                           rating_dimensions, rating_item)
from narrative_eval.reports.single_turn import anchored_sweep
from narrative_eval.study import all_studies
from ui.annotate_common import (ItemSource, build_agreement, rate_next_groups, rating_form, save_rating,
                                scale_descriptions, show_next, where_ratings_count, wire_submit)
from ui.common import REPO, cell_runs, esc, run_table, texts, user_error
from ui.compare import answers_name


def rated_studies(*own: str) -> list[SingleTurnStudy]:
    """The single-turn studies of the registry (plugins included) whose outputs this module rates: all but those
    named in `own`, whose outputs the tab rates with forms of their own."""
    return [study for study in all_studies() if isinstance(study, SingleTurnStudy) and study.name not in own]


def tab_title(study: SingleTurnStudy) -> str:
    """The sub-tab's name: what the study's answers are called, and the study."""
    return f"{answers_name(study).capitalize()} ({study.name})"


def prefix(study: SingleTurnStudy) -> str:
    """The start of every element id of the study's sub-tab (`annotate-<study>-sweep`,
    `annotate-<study>-<dimension>`)."""
    return f"annotate-{study.name}"


def item_html(study: SingleTurnStudy, item: annotations.AnnotationItem, order: tuple[int, ...]) -> str:
    """What the rater sees: each input the judge sees beside the answer under its label, then the answer."""
    shown = item_context(item)
    blocks = "".join(f"<div class='card-title'>{esc(name)}</div><div class='passage'>{esc(str(shown[key]))}</div>"
                     for key, name in context_inputs(study) if key in shown)
    answer = (f"<div class='card-title'>{esc(answer_label(study))}</div>"
              f"<div class='passage'><mark class='fill fill-0'>{esc(item.outputs[0])}</mark></div>")
    return f"<div class='card'><div class='card-title'>Item {esc(item.item_id[:6])}</div>{blocks}{answer}</div>"


def source(study: SingleTurnStudy) -> ItemSource:
    """The study's stored outputs, as the shared rating flow reads them."""
    form = live_form(study)

    def groups(sweep: str, kind: str) -> list[list]:
        return [[output] for output in outputs(study, cell_runs(study.experiment, sweep), run_table)]

    def make_item(sweep: str, kind: str, group: list) -> annotations.AnnotationItem:
        return rating_item(study, sweep, group[0],
                           lambda path: {item.id: item for item in form.items_in(REPO / path)} if path else {})

    return ItemSource(groups, lambda sweep, kind, group: output_item_id(study, sweep, group[0]), make_item,
                      partial(item_html, study), len(rating_dimensions(study)), "Pick a sweep.",
                      f"No {answers_name(study)} left to rate in this sweep for you.", "Press 'Next item' first.",
                      rate_next_groups)


def output_rating(study: SingleTurnStudy, state: dict[str, Any], rater_: str, seconds: float,
                  *scores) -> annotations.Rating:
    """The rating of one output: a 1-5 score per dimension of the study's rubric."""
    dimensions = rating_dimensions(study)
    if any(score is None for score in scores):
        raise user_error(f"Rate all {len(dimensions)} dimensions.", "scores")
    return annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pointwise", shown_order=(0,),
                              scores={key: int(score) for (key, _), score in zip(dimensions, scores)},
                              seconds=seconds, design=state.get("design") or {})


def build(study: SingleTurnStudy, demo: gr.Blocks, store: annotations.AnnotationStore, rater: gr.Textbox,
          rater_error: gr.Markdown) -> dict[str, gr.components.Component]:
    """The study's sub-tab: sweep, Next, the item, one 1-5 rating per rubric dimension, Submit; agreement with a
    judge (pointwise only), each cell's interval of its mean human rating (narrowing as ratings are saved) and the
    rating plan under it."""
    gr.Markdown(texts()["annotate_outputs"].format(answers=answers_name(study), study=study.name))
    dimensions = rating_dimensions(study)
    described = scale_descriptions(study.rubric)
    form = rating_form(
        demo, prefix(study), study.experiment, ("pointwise",), "item",
        lambda: [gr.Radio([1, 2, 3, 4, 5], label=name, info=described.get(key), elem_id=f"{prefix(study)}-{key}")
                 for key, name in dimensions],
        lambda: [], rater_error)
    # Its form rates one answer at a time under the study's one rubric: no pair is rated, so no pairwise table.
    judge, judges = build_agreement(store, [key for key, _ in dimensions], study.experiment, "Agreement with the judge",
                                    None, prefix(study), study.own_rubrics())
    items = source(study)
    show_intervals = where_ratings_count(
        form, store, items, judge, texts()["annotate_outputs_intervals"].format(answers=answers_name(study)),
        lambda sweep, path: anchored_sweep(study, sweep, annotations_path=path), study.own_rubrics())
    next_outputs = [form.current, form.view, form.message, form.counter, *form.pointwise]
    form.next_button.click(form.errors.beside_the_fields(partial(show_next, items, store), len(next_outputs)),
                           [rater, form.kind, form.sweep], [*next_outputs, *form.errors.outputs])
    wire_submit(form.submit, partial(save_rating, items, partial(output_rating, study), store),
                [form.current, rater, *form.pointwise], partial(show_next, items, store),
                [rater, form.kind, form.sweep], next_outputs, form.auto, [(judges, None, [judge]), show_intervals],
                form.errors)
    form.loaded.then(judges, None, [judge]).then(*show_intervals)
    return {"next": form.next_button, "submit": form.submit}


__all__ = ["build", "item_html", "output_rating", "prefix", "rated_studies", "source", "tab_title"]
