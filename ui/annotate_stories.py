"""Annotate tab, stories: blinded rating of an incremental-delivery sweep's final stories (the study's human validation).

Pointwise: the writing task's full brief and checklist and one final story, rated on the five writing dimensions
1-5 or N/A. Pairwise: the FULL and SHARDED final stories of one story id, model and seed as A and B in random order,
and the two five-level questions. The page holds no run, model or condition: only the opaque item id and the order
shown, in server-side state. Only stories the sweep scored (with a score record) are offered, so every rating can be
exported under a score-record id: Export writes the human-validation files (annotations.stories).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any
from pathlib import Path

import gradio as gr
import pandas as pd

from narrative_eval import annotations
from narrative_eval.annotations.items import judge_scores_of, output_source
from narrative_eval.studies.incremental import stories
from narrative_eval.studies.incremental.conversations import TABLE, score_records, tasks_of_run
from narrative_eval.studies.incremental.vocabulary import QUALITY_RUBRIC
from narrative_eval.studies.incremental.vocabulary import LEVELS, PAIRWISE_DIMENSIONS
from ui.annotate_common import (ItemSource, build_agreement, rating_form, rubric_dimensions, save_rating,
                                scale_descriptions, show_next, wire_submit)
from ui.common import (REPO, AppSettings, cell_runs, counted, esc, run_table, sweeps, texts,
                       user_error)
from ui.conversations import is_final

STUDY = stories.STUDY
KINDS = ("pointwise", "pairwise")
NA = "N/A"
"""The choice for a dimension that does not apply (exported as null)."""

CHECKLIST = "\n\nRequirements:\n"
"""Between the brief and its checklist in an item's context (the layout the judge's prompt uses)."""

QUESTIONS = {"constraint_following": "Constraint following: which story meets the task's requirements better?",
             "creative_quality": "Creative quality: which story is the better piece of writing overall?"}
"""The two pairwise questions, as asked."""


@dataclass(frozen=True)
class Response:
    """One scored final story of the sweep."""

    run: pd.Series
    """Its cell run (MLflow runs row)."""
    row: pd.Series
    """Its final row of the run's conversations table."""
    records: dict[str, str]
    """judge id -> its score-record id."""


def dimensions() -> list[tuple[str, str]]:
    return rubric_dimensions(QUALITY_RUBRIC)


def responses(sweep: str) -> list[Response]:
    """Every final story of the sweep's finished cells that has a score record (a judge's valid verdicts)."""
    found = []
    runs = cell_runs(STUDY, sweep)
    for _, run in runs.iterrows():
        table = run_table(run["run_id"], TABLE)
        if table.empty or "final" not in table.columns:
            continue
        for _, row in table[table["final"].map(is_final)].iterrows():
            records = stories.response_record_ids(score_records(run["run_id"]), str(row["story_id"]), int(row["seed"]))
            if records and str(row.get("reply") or "").strip():
                found.append(Response(run, row, records))
    return found


def groups(sweep: str, kind: str) -> list[list[Response]]:
    """Pointwise: every scored story alone. Pairwise: the FULL and SHARDED stories of the same story id, model, system
    prompt and seed, FULL first (the canonical and primary order)."""
    found = responses(sweep)
    if kind == "pointwise":
        return [[response] for response in found]
    pairs: dict[tuple, dict[str, Response]] = {}
    for response in found:
        key = (str(response.row["story_id"]), response.run.get("params.model_id"), response.run.get("params.prompt_setting"),
               int(response.row["seed"]))
        pairs.setdefault(key, {})[str(response.run.get("params.condition"))] = response
    return [[pair[c] for c in stories.PAIR_CONDITIONS] for pair in pairs.values()
            if all(c in pair for c in stories.PAIR_CONDITIONS)]


def item_id_of(sweep: str, kind: str, group: list[Response]) -> str:
    return annotations.item_key(kind, sweep, str(group[0].row["story_id"]), int(group[0].row["seed"]),
                                [response.run["run_id"] for response in group])


def make_item(sweep: str, kind: str, group: list[Response], repo: Path = REPO) -> annotations.AnnotationItem | None:
    """The item of a group, its context the task's full brief and checklist (None when the task file is gone)."""
    story_id, seed = str(group[0].row["story_id"]), int(group[0].row["seed"])
    task = tasks_of_run(group[0].run["run_id"], repo).get(story_id)
    if task is None:
        return None
    context = task.full_instruction + CHECKLIST + "\n".join(c.requirement for c in task.constraints)
    sources = tuple({**output_source(r.run, r.row), stories.RECORDS: r.records} for r in group)
    return annotations.AnnotationItem(
        item_id=item_id_of(sweep, kind, group), kind=kind, study=STUDY, sweep=sweep, instance_id=story_id, seed=seed,
        context=context, outputs=tuple(str(r.row["reply"]) for r in group), sources=sources,
        judge_scores=tuple(judge_scores_of(r.row) for r in group))


def item_html(item: annotations.AnnotationItem, order: tuple[int, ...]) -> str:
    """The brief and its checklist, then the story (pointwise) or Story A and Story B in the order given."""
    brief, _, checklist = item.context.rpartition(CHECKLIST)
    requirements = "".join(f"<li>{esc(line)}</li>" for line in checklist.splitlines() if line.strip())
    task = (f"<div class='card'><div class='card-title'>Item {esc(item.item_id[:6])}: the writing task</div>"
            f"<div class='story brief'>{esc(brief)}</div><div class='card-title'>Checklist</div>"
            f"<ul class='checklist'>{requirements}</ul></div>")
    if item.kind == "pointwise":
        return task + f"<div class='card'><div class='card-title'>The story</div><div class='story'>{esc(item.outputs[0])}</div></div>"
    cards = "".join(f"<div class='card' data-slot='{slot}'><div class='card-title'>Story {slot}</div>"
                    f"<div class='story'>{esc(item.outputs[output])}</div></div>" for slot, output in zip("AB", order))
    return task + f"<div class='side-by-side'>{cards}</div>"


def story_rating(state: dict[str, Any], rater_: str, seconds: float, *answers) -> annotations.Rating:
    """The rating of a story (pointwise: the five dimensions, N/A allowed) or of a pair (pairwise: the two questions);
    `answers` are the five dimensions, then the two questions."""
    keys = [key for key, _ in dimensions()]
    scores, verdicts = answers[:len(keys)], dict(zip(PAIRWISE_DIMENSIONS, answers[len(keys):]))
    if state["kind"] == "pairwise":
        if not all(verdicts.values()):
            raise user_error("Answer both questions.", "preference")
        return stories.story_pairwise_rating(state["item_id"], rater_, state["order"], verdicts, seconds)
    if any(s is None for s in scores):
        raise user_error(f"Rate all five dimensions ({NA} where one does not apply).", "scores")
    return annotations.Rating(item_id=state["item_id"], rater=rater_, kind="pointwise", shown_order=(0,),
                              scores={k: None if s == NA else int(s) for k, s in zip(keys, scores)}, seconds=seconds)


def story_source() -> ItemSource:
    """The final stories of an incremental-delivery sweep, as the shared rating flow reads them."""
    return ItemSource(groups, item_id_of, make_item, item_html, len(dimensions()) + len(PAIRWISE_DIMENSIONS),
                      "Pick an incremental-delivery sweep.", "No scored story left to rate in this sweep for you.",
                      "Press 'Next story' first.")


def export(store: annotations.AnnotationStore, app: AppSettings, sweep_: str | None, judge_: str | None) -> tuple:
    """Write the sweep's story ratings (every rater) in the human-validation formats under reports/<sweep>/human_ratings/."""
    if sweep_ not in sweeps(STUDY):  # the name becomes a folder: only a sweep that exists
        raise user_error("Pick an incremental-delivery sweep.", "sweep")
    if not judge_:
        raise user_error("No story of this sweep has been rated yet.")
    result = stories.story_exports(store, sweep_, judge_)
    if not (result.ratings or result.verdicts):
        raise user_error(f"No rating of this sweep's stories has a score record from {judge_}.", "export-judge")
    out = app.reports_dir / sweep_ / "human_ratings"
    paths = stories.save_story_exports(result, out)
    flags = " ".join(f"--{kind} {path}" for kind, path in paths.items())
    left_out = f" {counted(result.left_out, 'rating')} left out: no score record from {esc(judge_)}." if result.left_out else ""
    note = (f"Exported {counted(len(result.ratings), 'pointwise rating')} and "
            f"{counted(len(result.verdicts), 'pairwise verdict')} on {counted(len(result.cases), 'case')}, named by {esc(judge_)}'s score records.{left_out}\n\n"
            f"`python -m experiments.report human-validation --sweep {sweep_} {flags} --out {out.parent / 'human_validation'}`")
    return [str(path) for path in paths.values()], note


def build(app: AppSettings, demo: gr.Blocks, store: annotations.AnnotationStore, rater: gr.Textbox,
          rater_error: gr.Markdown) -> dict:
    """The stories half of the Annotate tab; `rater` is the tab's shared name box, `rater_error` the line under it."""
    gr.Markdown(texts()["annotate_stories"])
    described = scale_descriptions(QUALITY_RUBRIC)
    form = rating_form(
        demo, "stories", STUDY, KINDS, "story",
        lambda: [gr.Radio(["1", "2", "3", "4", "5", NA], label=label, info=described.get(key), elem_id=f"stories-{key}")
                 for key, label in dimensions()],
        lambda: [gr.Radio(list(LEVELS), label=QUESTIONS[key], elem_id=f"stories-{key}") for key in PAIRWISE_DIMENSIONS],
        rater_error)
    judge, judges = build_agreement(store, [key for key, _ in dimensions()], STUDY, "Agreement of story ratings with the judge",
                                    "Pairwise: creative-quality preference vs the judge's mean quality", "stories",
                                    (QUALITY_RUBRIC,))
    with gr.Accordion("Export for the human-validation report", open=False, elem_id="stories-export-section"):
        with gr.Row():
            with gr.Column():
                export_judge = gr.Dropdown([], label="Score records of judge", elem_id="stories-export-judge",
                                           allow_custom_value=True)
                form.errors.box("export-judge")
            export_button = gr.Button("Export", scale=0, elem_id="stories-export")
        files = gr.File(label="Exported files", file_count="multiple", interactive=False, elem_id="stories-export-files")
        exported = gr.Markdown(elem_id="stories-export-message")

    def on_export_judges(sweep_):
        ids = stories.story_judges(store, sweep_) if sweep_ else []
        return gr.Dropdown(choices=ids, value=ids[0] if ids else None)

    next_outputs = [form.current, form.view, form.message, form.counter, *form.pointwise, *form.pairwise]
    form.loaded.then(judges, None, [judge])
    form.sweep.change(on_export_judges, [form.sweep], [export_judge])
    source = story_source()
    form.next_button.click(form.errors.beside_the_fields(partial(show_next, source, store), len(next_outputs)),
                           [rater, form.kind, form.sweep], [*next_outputs, *form.errors.outputs])
    wire_submit(form.submit, partial(save_rating, source, story_rating, store),
                [form.current, rater, *form.pointwise, *form.pairwise], partial(show_next, source, store),
                [rater, form.kind, form.sweep], next_outputs, form.auto,
                (lambda sweep_: (judges(), on_export_judges(sweep_)), [form.sweep], [judge, export_judge]), form.errors)
    export_button.click(form.errors.beside_the_fields(partial(export, store, app), 2), [form.sweep, export_judge],
                        [files, exported, *form.errors.outputs])
    return {"sweep": form.sweep, "next": form.next_button, "submit": form.submit, "export": export_button}
