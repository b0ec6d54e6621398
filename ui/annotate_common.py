"""What the Annotate tab's sub-tabs share (fills of an infilling sweep, any other single-turn study's outputs, stories
of an incremental-delivery sweep): the next unrated item, the rate-next order of a sweep's outputs, the rating
counter, the 'saved' message, agreement with a judge and its few-items warning, the submit-then-next wiring, and
ratings as human feedback on the rated generations' MLflow traces."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr
import numpy as np
import pandas as pd

from narrative_eval import annotations
from narrative_eval.annotations.items import judge_scores_of
from narrative_eval.annotations.rate_next import (cell_intervals, design_of, judge_uncertainty, rate_next_plan,
                                                  sweep_seed)
from narrative_eval.judges import load_rubric
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.stats.rating_plan import PLAN_COLUMNS, rating_plan_table
from narrative_eval.tracing import log_human_feedback
from narrative_eval.reports.human_ratings import CELL
from narrative_eval.reports.judge_checks import judge_warning
from narrative_eval.reports.tables import readable
from ui.common import FORM, FieldErrors, esc, judge_failed_checks, pick_sweep, texts, user_error

FEW_ITEMS = 30
"""Below this many rated items an agreement figure is too uncertain to lean on."""



def rubric_dimensions(rubric: str) -> list[tuple[str, str]]:
    """(key, label) of each dimension of a judge's rubric, the dimensions a pointwise rating gives."""
    return [(d.key, d.label) for d in load_rubric(rubric).dimensions]


def scale_descriptions(rubric_name: str) -> dict[str, str]:
    """What the scale points of each dimension mean, as the judge's rubric says it ('- key: what. 1 ...; 5 ...')."""
    rubric = load_rubric(rubric_name)
    found = {}
    for key, _ in rubric_dimensions(rubric_name):
        match = re.search(rf"^\s*-\s*{re.escape(key)}\s*:\s*(.+)$", rubric.system or "", re.MULTILINE)
        if match:
            found[key] = match.group(1).strip()
    return found


def cell_of(group: list) -> tuple[str, str]:
    """The cell (model, prompt setting) of a group of stored outputs, each (its cell run, its generations row)."""
    run = group[0][0]
    return str(run.get("params.model_id")), str(run.get("params.prompt_setting"))


def rate_next_groups(sweep: str, groups: list[list]) -> list[tuple[list, dict[str, Any]]]:
    """A sweep's pointwise groups in the rate-next order (annotations.rate_next), each with its design; in the given
    order with no design when no judge scored any of them (nothing to tell where ratings count)."""
    uncertainty = [judge_uncertainty(judge_scores_of(g[0][1])) for g in groups]
    if not any(value == value for value in uncertainty):
        return [(group, {}) for group in groups]
    plan = rate_next_plan([cell_of(g) for g in groups], uncertainty, sweep_seed(sweep))
    return [(groups[int(row["index"])], design_of(row)) for _, row in plan.iterrows()]


def checked_rater(rater: str | None) -> str:
    """The rater's name, or a message when there is none (ratings are kept per rater)."""
    rater = (rater or "").strip()
    if not rater:
        raise user_error("Type your name first: ratings are kept per rater.", "rater")
    return rater


def first_unrated(store: annotations.AnnotationStore, rater: str, groups: list, item_id_of: Callable[[Any], str],
                  make_item: Callable[[Any], annotations.AnnotationItem | None],
                  rng: random.Random | None) -> annotations.AnnotationItem | None:
    """A random group's item this rater has not rated yet (the first in the given order when `rng` is None), stored
    before it is shown (None when none is left)."""
    done = store.rated_item_ids(rater)
    candidates = list(groups)
    if rng is not None:
        rng.shuffle(candidates)
    for group in candidates:
        if item_id_of(group) in done:
            continue
        item = make_item(group)
        if item is not None:
            store.add_item(item)
            return item
    return None


@dataclass(frozen=True)
class ItemSource:
    """What one half of the tab rates: its groups of outputs, each group's item and how an item is shown; the rest of
    the flow (the next unrated item, the counter, saving a rating) is `show_next` and `save_rating`, shared."""

    groups: Callable[[str, str], list]
    """(sweep, kind) -> the groups of outputs an item can be made of."""
    item_id_of: Callable[[str, str, Any], str]
    """(sweep, kind, group) -> the item's id (stable: a rated item is not shown again)."""
    make_item: Callable[[str, str, Any], annotations.AnnotationItem | None]
    """(sweep, kind, group) -> the item (None when the group cannot make one)."""
    item_html: Callable[[annotations.AnnotationItem, tuple[int, ...]], str]
    """(item, the order its outputs are shown in) -> the item as the rater sees it."""
    inputs: int
    """The rating inputs, emptied when a new item is shown."""
    pick_sweep: str
    """Said under the sweep when none is picked."""
    nothing_left: str
    """Shown when the rater has rated every item of the sweep."""
    press_next: str
    """Said when Submit is pressed before any item is shown."""
    rate_next: Callable[[str, list], list[tuple[Any, dict[str, Any]]]] | None = None
    """(sweep, pointwise groups) -> the groups in the order to rate them, each with its sampling design
    (annotations.rate_next); None: pointwise items come in a random order."""


INTERVAL_COLUMNS = ["model", "setting", "n_rated", "n_all", "mean", "lo", "hi", "width", "reason"]
"""The columns of the table of each cell's interval under a pointwise form, in order (shown under their labels)."""


def judge_mean(group: list, judge: str) -> float:
    """A judge's mean score of a group's (first) output over its dimensions; NaN when it scored none."""
    scores = [v for v in judge_scores_of(group[0][1]).get(judge, {}).values() if v is not None]
    return float(np.mean(scores)) if scores else math.nan


def interval_table(source: ItemSource, store: annotations.AnnotationStore, sweep: str | None,
                   judge: str | None) -> pd.DataFrame:
    """Each cell's stratified PPI++ interval of the mean human rating of its outputs (the pointwise groups of
    `source`; over raters and dimensions), with `judge`'s mean score as the prediction, in the strata of the
    rate-next order."""
    if not sweep or not judge:
        return readable(pd.DataFrame(columns=INTERVAL_COLUMNS))
    groups = source.groups(sweep, "pointwise")
    ratings: dict[str, list[float]] = {}
    for rating in store.ratings(kind="pointwise"):
        values = [float(v) for v in rating.scores.values() if v is not None]
        if values:
            ratings.setdefault(rating.item_id, []).append(float(np.mean(values)))
    human = [float(np.mean(ratings[i])) if (i := source.item_id_of(sweep, "pointwise", g)) in ratings else math.nan
             for g in groups]
    found = cell_intervals([cell_of(g) for g in groups], [judge_uncertainty(judge_scores_of(g[0][1])) for g in groups],
                           [judge_mean(g, judge) for g in groups], human)
    rows = [{"model": cell[0], "setting": cell[1], "n_rated": result.n_rated, "n_all": result.n_all,
             "mean": result.estimate.mean, "lo": result.estimate.lo, "hi": result.estimate.hi,
             "width": result.estimate.hi - result.estimate.lo, "reason": result.reason} for cell, result in found]
    return readable(pd.DataFrame(rows, columns=INTERVAL_COLUMNS).round(3))


PLAN_TABLE_COLUMNS = [*CELL, "dimension", *PLAN_COLUMNS, "judge"]
"""The columns of the rating-plan table under a pointwise form: a cell's keys as the single-turn reports read the
outputs (reports.human_ratings), the dimension, the plan's numbers (stats.rating_plan), the judge."""


def empty_plan(rubrics: tuple[str, ...]) -> pd.DataFrame:
    """The rating-plan table with no row, under its labels: what it shows before a plan is made."""
    return readable(pd.DataFrame(columns=PLAN_TABLE_COLUMNS), rubrics)


def plan_table(anchored_of: Callable[[str, Path], list[AnchoredOutputs]], rubrics: tuple[str, ...],
               store: annotations.AnnotationStore, sweep: str | None, judge: str | None,
               width: float | None) -> pd.DataFrame:
    """The rating plan of the sweep's cells for an interval of full width `width` (stats.rating_plan), per dimension
    (each as `rubrics`, the rated rubric, name it), from the sweep's outputs with the store's ratings
    (`anchored_of(sweep, store path)`, one per judge)."""
    if not sweep:
        raise user_error("Pick a sweep.", "sweep")
    if width is None or not width > 0:
        raise user_error("The target width must be a positive number (e.g. 0.5 on the 1-5 scale).", "width")
    anchored = [a for a in anchored_of(sweep, store.path) if judge in (None, a.judge)]
    frames = [rating_plan_table(a.outputs, a.cell_keys, a.dimensions, a.cluster, width).assign(judge=a.judge)
              for a in anchored]
    if not frames:
        return empty_plan(rubrics)
    plan = pd.concat(frames, ignore_index=True).round(3)
    return readable(plan, rubrics)


def where_ratings_count(form: RatingForm, store: annotations.AnnotationStore, source: ItemSource, judge: gr.Dropdown,
                        intro: str, anchored_of: Callable[[str, Path], list[AnchoredOutputs]],
                        rubrics: tuple[str, ...]) -> tuple:
    """Under a pointwise form: each cell's interval of its mean human rating (`interval_table`, refreshed when the
    sweep or the judge changes) and the rating plan for a target width (`plan_table`, its dimensions as `rubrics`
    name them). Returns the event (fn, inputs, outputs) that refreshes the intervals, to run after each saved rating
    and when the page loads."""
    prefix = form.prefix
    with gr.Accordion("Where the ratings count: each cell's interval and the rating plan", open=True):
        gr.Markdown(intro)
        intervals = gr.Dataframe(readable(pd.DataFrame(columns=INTERVAL_COLUMNS)), interactive=False,
                                 label="Each cell's mean human rating (stratified PPI++, 95% interval)",
                                 elem_id=f"{prefix}-intervals")
        with gr.Row():
            width = gr.Number(0.5, label="Target width of the interval", elem_id=f"{prefix}-width")
            plan_button = gr.Button("Plan ratings", scale=0, elem_id=f"{prefix}-plan")
        form.errors.box("width")
        plan = gr.Dataframe(empty_plan(rubrics), interactive=False, label="Ratings each cell needs",
                            elem_id=f"{prefix}-plan-table")
    show_intervals = (partial(interval_table, source, store), [form.sweep, judge], [intervals])
    form.sweep.change(*show_intervals)
    judge.change(*show_intervals)
    plan_button.click(form.errors.beside_the_fields(partial(plan_table, anchored_of, rubrics, store), 1),
                      [form.sweep, judge, width], [plan, *form.errors.outputs])
    return show_intervals


def show_next(source: ItemSource, store: annotations.AnnotationStore, rater_: str, kind_: str,
              sweep_: str | None) -> list:
    """The next unrated item for this rater (its state, its view, an empty message), the rating counter, and the
    emptied inputs."""
    rater_ = checked_rater(rater_)
    if not sweep_:
        raise user_error(source.pick_sweep, "sweep")
    rng = random.Random()
    found = source.groups(sweep_, kind_)
    designs: dict[str, dict[str, Any]] = {}
    ordered = found
    if source.rate_next is not None and kind_ == "pointwise":
        planned = source.rate_next(sweep_, found)
        ordered = [group for group, _ in planned]
        designs = {source.item_id_of(sweep_, kind_, group): design for group, design in planned}
    item = first_unrated(store, rater_, ordered, partial(source.item_id_of, sweep_, kind_),
                         partial(source.make_item, sweep_, kind_), None if designs else rng)
    resets = [gr.Radio(value=None) for _ in range(source.inputs)]
    count = progress_line(store, {source.item_id_of(sweep_, kind_, group) for group in found}, kind_, rater_)
    if item is None:
        return [None, f"<div class='empty'>{source.nothing_left}</div>", "", count, *resets]
    order = (0,) if item.kind == "pointwise" else tuple(rng.sample([0, 1], 2))
    state = {"item_id": item.item_id, "order": order, "shown_at": time.time(), "kind": item.kind,
             "design": designs.get(item.item_id, {})}
    return [state, source.item_html(item, order), "", count, *resets]


def save_rating(source: ItemSource, rating_of: Callable[..., annotations.Rating], store: annotations.AnnotationStore,
                state: dict[str, Any] | None, rater_: str, *answers: Any) -> tuple:
    """Store the rating of the item shown (`rating_of(state, rater, seconds, *answers)` makes it, or raises a FormError
    under the field it is about), also as feedback on the rated generations' traces; clears the state so the next item
    may follow."""
    if not state:
        raise user_error(source.press_next)
    rater_ = checked_rater(rater_)
    rating = rating_of(state, rater_, time.time() - state["shown_at"], *answers)
    store.save_rating(rating)
    rating_as_feedback(store.item(state["item_id"]), rating)
    return None, saved_message(store, rater_)


def progress_line(store: annotations.AnnotationStore, item_ids: set[str], kind: str, rater: str) -> str:
    """'k of N' items of this sweep and mode the rater has rated."""
    rated = len(item_ids & store.rated_item_ids(rater))
    return f"**{rated} of {len(item_ids)}** {kind} items of this sweep rated by {esc(rater)}."


def saved_message(store: annotations.AnnotationStore, rater: str) -> str:
    counts = store.counts().get(rater, {})
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"Saved. {esc(rater)} has rated {summary} in all."


def rating_as_feedback(item: annotations.AnnotationItem, rating: annotations.Rating) -> None:
    """The rating also goes onto the rated generations' MLflow traces, as feedback from a human source
    (pairwise: each output's preference from its own side, +2 clearly better ... -2 clearly worse; a story pair
    gives one per question). N/A is not logged."""

    traces = [source.get("trace_id") for source in item.sources]
    if rating.kind == "pointwise" and traces and traces[0]:
        for key, score in (rating.scores or {}).items():
            if score is not None:
                log_human_feedback(traces[0], f"human/{key}", score, rating.rater)
    elif rating.kind == "pairwise" and len(traces) == 2 and rating.preference is not None:
        preferences = rating.scores or {"preference": rating.preference}
        for trace_id, sign in zip(traces, (1, -1)):
            for key, value in (preferences.items() if trace_id else ()):
                log_human_feedback(trace_id, f"human/{key}", sign * value, rating.rater)


def agreement_tables(store: annotations.AnnotationStore, judge: str | None, keys: Sequence[str],
                     study: str, rubrics: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Human-judge agreement tables of one study's items (its dimensions as `rubrics`, the rated rubric, name them),
    and a warning when they rest on fewer than FEW_ITEMS items."""
    words = texts()["agreement"]
    if not judge:
        return pd.DataFrame(), pd.DataFrame(), words["no_judge"]
    pointwise_rows = annotations.pointwise_agreement(store, judge, keys, study=study)
    pairwise_row = annotations.pairwise_agreement(store, judge, keys, study=study)
    counts = [row.get("n", 0) for row in pointwise_rows] + [pairwise_row.get("n", 0)]
    rated = max(counts) if counts else 0
    if not rated:
        return pd.DataFrame(), pd.DataFrame(), words["none_rated"].format(judge=judge)
    warning = words["few"].format(rated=rated, few=FEW_ITEMS) if rated < FEW_ITEMS else ""
    checks = judge_failed_checks(study, judge)
    if checks:
        warning = f"**{judge_warning(judge, checks)}.** {warning}".strip()
    return (readable(pd.DataFrame(pointwise_rows).round(3), rubrics), readable(pd.DataFrame([pairwise_row]).round(3)),
            warning)


def build_agreement(store: annotations.AnnotationStore, keys: Sequence[str], study: str, title: str,
                    pairwise_label: str | None, prefix: str,
                    rubrics: tuple[str, ...]) -> tuple[gr.Dropdown, Callable[[], gr.Dropdown]]:
    """The agreement accordion (`<prefix>-agreement`: judge, Compute, the pointwise table, the pairwise one under
    `pairwise_label`, the few-items warning `<prefix>-few`), the dimensions as `rubrics` name them; a tab that rates
    no pairs (`pairwise_label` None) has no pairwise table, which would stay empty. Returns the judge dropdown and the
    event function that refills it with the judges of the study's stored items."""
    with gr.Accordion(title, open=False, elem_id=f"{prefix}-agreement"):
        with gr.Row():
            judge = gr.Dropdown([], label="Judge", allow_custom_value=True)
            compute = gr.Button("Compute", scale=0, elem_id=f"{prefix}-few-compute")
        tables = [gr.Dataframe(readable(pd.DataFrame(columns=["dimension"])),
                               label="Pointwise: human vs judge per dimension", interactive=False,
                               elem_id=f"{prefix}-agreement-pointwise")]
        if pairwise_label is not None:
            tables.append(gr.Dataframe(readable(pd.DataFrame(columns=["judge"])), label=pairwise_label,
                                       interactive=False, elem_id=f"{prefix}-agreement-pairwise"))
        few = gr.Markdown(texts()["agreement"]["before_compute"], elem_id=f"{prefix}-few")

    def compute_tables(judge_: str | None) -> list:
        pointwise, pairwise, warning = agreement_tables(store, judge_, keys, study, rubrics)
        return [pointwise, *([pairwise] if pairwise_label is not None else []), warning]

    compute.click(compute_tables, [judge], [*tables, few])

    def judges() -> gr.Dropdown:
        ids = annotations.judge_ids(store, study)
        return gr.Dropdown(choices=ids, value=ids[0] if ids else None)

    return judge, judges


def wire_submit(submit: gr.Button, save: Callable, save_inputs: list, show: Callable, show_inputs: list,
                next_outputs: list, auto: gr.Checkbox, after: tuple | list[tuple], errors: FieldErrors) -> None:
    """Submit saves the rating (outputs: the state, cleared, and the message; a mistake is said under its field, and
    the item stays); then, with `auto` checked, the next item is shown with the 'Saved' message kept above
    it; then `after` (fn, inputs, outputs; or a list of them) runs. `next_outputs` starts with the state, the item
    view and the message, as `show` returns them."""
    current, message = next_outputs[0], next_outputs[2]

    def advance(auto_, state, message_, *args):
        if not auto_ or state is not None:  # state is cleared only by a saved rating
            return [gr.skip()] * len(next_outputs)
        shown = show(*args)
        shown[2] = message_
        return shown

    event = submit.click(errors.beside_the_fields(save, 2), save_inputs, [current, message, *errors.outputs]).success(
        advance, [auto, current, message, *show_inputs], next_outputs)
    for step in after if isinstance(after, list) else [after]:
        event = event.then(*step)


@dataclass
class RatingForm:
    """The controls both halves lay out alike."""

    kind: gr.Radio
    """Mode: pointwise or pairwise."""
    sweep: gr.Dropdown
    """The sweep whose outputs are rated."""
    next_button: gr.Button
    """Shows the next unrated item."""
    view: gr.HTML
    """The item shown."""
    pointwise: list
    """The pointwise inputs (one per dimension)."""
    pairwise: list
    """The pairwise inputs."""
    auto: gr.Checkbox
    """Whether the next item follows a saved rating."""
    submit: gr.Button
    """Saves the rating."""
    message: gr.Markdown
    """'Saved ...'."""
    errors: FieldErrors
    """What is missing or wrong in the form, under the field it is about."""
    counter: gr.Markdown
    """'k of N' rated."""
    current: gr.State
    """The item shown and its order (server side); None once rated."""
    loaded: Any
    """The page-load event that picked the sweep, to chain on."""
    prefix: str = ""
    """What its elements' ids start with."""


def rating_form(demo: gr.Blocks, prefix: str, study: str, kinds: Sequence[str], item_word: str,
                pointwise: Callable[[], list], pairwise: Callable[[], list], rater_error: gr.Markdown) -> RatingForm:
    """Mode (shown when there are several), sweep (the study's, picked when the page loads) and Next; the item; the pointwise and pairwise inputs
    (made by the callbacks, those of the first mode shown); auto-advance, Submit, the message and the counter.
    Elements are named '<prefix>-mode', '<prefix>-sweep', '<prefix>-next', '<prefix>-item', ...; a mistake is said
    under the rater's name (`rater_error`, the tab's), the sweep, the scores or the preference, else under Submit."""
    errors = FieldErrors(prefix)
    errors.add("rater", rater_error)
    with gr.Row():
        kind = gr.Radio(list(kinds), value=kinds[0], label="Mode", elem_id=f"{prefix}-mode", visible=len(kinds) > 1)
        with gr.Column():
            sweep = gr.Dropdown([], label=f"Sweep ({study})", elem_id=f"{prefix}-sweep", allow_custom_value=True)
            errors.box("sweep")
        next_button = gr.Button(f"Next {item_word}", variant="primary", scale=0, elem_id=f"{prefix}-next")
    view = gr.HTML(elem_id=f"{prefix}-item")
    with gr.Group(visible=kinds[0] == "pointwise") as pointwise_group:
        pointwise_inputs = pointwise()
        errors.box("scores")
    with gr.Group(visible=kinds[0] == "pairwise") as pairwise_group:
        pairwise_inputs = pairwise()
        errors.box("preference")
    auto = gr.Checkbox(True, label=f"Show the next {item_word} after each rating", elem_id=f"{prefix}-auto")
    submit = gr.Button("Submit rating", elem_id=f"{prefix}-submit")
    errors.box(FORM)
    message = gr.Markdown(elem_id=f"{prefix}-message")
    counter = gr.Markdown(elem_id=f"{prefix}-progress")

    def on_refresh(current_sweep):
        names, value = pick_sweep(study, current_sweep)
        return gr.Dropdown(choices=names, value=value)

    kind.change(lambda k: (gr.Group(visible=k == "pointwise"), gr.Group(visible=k == "pairwise")), [kind],
                [pointwise_group, pairwise_group])
    return RatingForm(kind, sweep, next_button, view, pointwise_inputs, pairwise_inputs, auto, submit, message, errors,
                      counter, gr.State(None), demo.load(on_refresh, [sweep], [sweep]), prefix)
