"""Control items of the incremental-delivery judges (judges.checks): stories whose judge verdict is known.

The shipped tasks carry no reference story, so the builders take the stories as input: story_id -> a story
written for that task (in a sweep, `sweep_stories`: a FULL final reply its cells judged; or reference stories
where a task set has them). For each of K tasks with a story (judges.checks.sample_ids over story ids):

- checklist (creative_checklist): refusal, the refusal of controls.yaml against the task's own
  requirements, adherence near 0; other_task_story, another task's story against this task's requirements,
  below this task's own story;
- quality (the judge's quality rubric): shuffled_sentences, the story with its sentences in a seeded random
  order (judges.checks.shuffled_sentences, seeded by the story id), below the story itself; padded_output, the
  story padded with neutral filler (judges.checks.padded_text), not above the story itself;
- pairwise (each pairwise rubric): identical_pair, the story against itself, a tie in both orders; refusal_pair,
  the story (A) against the refusal (B), the story preferred in both orders; padded_output, the story (A) against
  itself padded (B), the padded one not preferred. Position bias comes from all three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.judges.checks import (
    DEFAULT_CONTROLS,
    PADDED,
    ControlItem,
    ControlSet,
    padded_text,
    pick_other,
    sample_ids,
    shuffled_sentences,
)
from narrative_eval.judges.checks import refusal_text as generic_refusal
from narrative_eval.multi_turn import Conversation, Truncation
from narrative_eval.records import CellSpec, JudgeSpec
from narrative_eval.records.keys import seeded
from narrative_eval.studies.incremental.cell_tasks import select_tasks
from narrative_eval.studies.incremental.config import IncrementalConfig
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.score_records import model_label
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, PAIRWISE_RUBRIC, QUALITY_RUBRIC
from narrative_eval.studies.incremental.vocabulary import NAME, REFERENCE
from narrative_eval.study import RequestCount, experiment_of

CONTROL_TEXTS_FILE = Path(__file__).with_name("controls.yaml")
"""The controls' fixed texts (the refusal)."""

REFUSAL, OTHER_STORY, SHUFFLED, IDENTICAL, REFUSAL_PAIR = (
    "refusal", "other_task_story", "shuffled_sentences", "identical_pair", "refusal_pair")
"""The check names."""


def refusal_text(path: str | Path | None = None) -> str:
    """The refusal a control shows in place of a story (the study's controls.yaml's `refusal`)."""
    return generic_refusal(path if path is not None else CONTROL_TEXTS_FILE)


def _chosen(tasks: Sequence[WritingTask], stories: Mapping[str, str], k: int | None) -> list[WritingTask]:
    """The K tasks (of those with a non-empty story) that become controls."""
    with_story = {task.story_id: task for task in tasks if (stories.get(task.story_id) or "").strip()}
    return [with_story[story_id] for story_id in sample_ids(with_story, k)]


def _inputs(task: WritingTask, response: str) -> dict[str, Any]:
    return {"task": task.full_instruction, "requirements": list(task.constraints), "response": response}


def checklist_controls(tasks: Sequence[WritingTask], stories: Mapping[str, str], k: int | None = DEFAULT_CONTROLS,
                       refusal: str | None = None) -> list[ControlItem]:
    """refusal and other_task_story items of K tasks under the checklist rubric; another task's story comes from
    any task with a story, so pass all of them."""
    refusal = refusal or refusal_text()
    donors = [story_id for story_id, text in stories.items() if (text or "").strip()]
    items = []
    for task in _chosen(tasks, stories, k):
        own = _inputs(task, stories[task.story_id])
        items.append(ControlItem(CHECKLIST_RUBRIC, REFUSAL, task.story_id, _inputs(task, refusal), "near_zero"))
        donor = pick_other(task.story_id, [d for d in donors if stories[d].strip() != stories[task.story_id].strip()])
        if donor is not None:
            items.append(ControlItem(CHECKLIST_RUBRIC, OTHER_STORY, task.story_id, _inputs(task, stories[donor]),
                                     "below_reference", reference=own))
    return items


def quality_controls(tasks: Sequence[WritingTask], stories: Mapping[str, str], k: int | None = DEFAULT_CONTROLS,
                     rubric: str | None = None, seed: int = 0) -> list[ControlItem]:
    """shuffled_sentences and padded_output items of K tasks under `rubric` (default: the study's quality rubric)."""
    rubric = rubric or QUALITY_RUBRIC
    items = []
    for task in _chosen(tasks, stories, k):
        shuffled = shuffled_sentences(stories[task.story_id], seed, task.story_id)
        if shuffled is not None:
            items.append(ControlItem(rubric, SHUFFLED, task.story_id, _inputs(task, shuffled), "below_reference",
                                     reference=_inputs(task, stories[task.story_id])))
        padded = padded_text(stories[task.story_id], seed, task.story_id)
        if padded is not None:
            items.append(ControlItem(rubric, PADDED, task.story_id, _inputs(task, padded), "padded_not_above",
                                     reference=_inputs(task, stories[task.story_id])))
    return items


def pairwise_controls(tasks: Sequence[WritingTask], stories: Mapping[str, str], k: int | None = DEFAULT_CONTROLS,
                      rubric: str = PAIRWISE_RUBRIC, refusal: str | None = None) -> list[ControlItem]:
    """identical_pair, refusal_pair and padded_output items of K tasks under a pairwise rubric (each judged in both
    orders)."""
    refusal = refusal or refusal_text()
    items = []
    for task in _chosen(tasks, stories, k):
        story = stories[task.story_id]
        pair = {"task": task.full_instruction, "requirements": list(task.constraints), "response_a": story}
        items.append(ControlItem(rubric, IDENTICAL, task.story_id, {**pair, "response_b": story}, "tie"))
        items.append(ControlItem(rubric, REFUSAL_PAIR, task.story_id, {**pair, "response_b": refusal}, "a_preferred"))
        padded = padded_text(story, 0, task.story_id)
        if padded is not None:
            items.append(ControlItem(rubric, PADDED, task.story_id, {**pair, "response_b": padded}, "padded_not_preferred"))
    return items


def incremental_controls(tasks: Sequence[WritingTask], stories: Mapping[str, str], k: int | None = DEFAULT_CONTROLS,
                         quality_rubric: str | None = None, pairwise_rubrics: Iterable[str] = (),
                         seed: int = 0) -> list[ControlItem]:
    """Every control of one judge of the study: checklist, quality under its rubric, and each pairwise rubric."""
    refusal = refusal_text()
    items = checklist_controls(tasks, stories, k, refusal) + quality_controls(tasks, stories, k, quality_rubric, seed)
    for rubric in pairwise_rubrics:
        items.extend(pairwise_controls(tasks, stories, k, rubric, refusal))
    return items


# --------------------------------------------------------------------------- in a sweep


def _cell_stories(cell: CellSpec, run_id: str) -> dict[str, dict[str, str]]:
    """Story id -> {'<model>/<condition>/seed<k>': final reply} of a finished cell's replies it judged."""
    score_truncated = Truncation.of_cell(cell).score
    found: dict[str, dict[str, str]] = {}
    for logged in tracking.load_json_artifact(run_id, "trajectories.json"):
        conversation = Conversation.from_logged(logged, "story_id")
        if logged["kept"] and conversation.scoreable(score_truncated) and conversation.final_text.strip():
            key = seeded(f"{model_label(cell)}/{cell.condition}", conversation.seed)
            found.setdefault(conversation.item.id, {})[key] = conversation.final_text
    return found


def sweep_stories(cells: Sequence[CellSpec]) -> dict[str, str]:
    """Story id -> the story its controls use: a final reply of a finished FULL cell of the grid (any condition's
    when the grid has no FULL cell) that the cell judged, so every judge's verdict on it as written comes from the
    request cache; of several models and seeds, the one whose pairing with the story hashes lowest, which stays
    chosen as models join the sweep unless a newcomer's hashes lower."""
    experiment = experiment_of(NAME)
    candidates: dict[str, dict[str, str]] = {}
    for cell in [c for c in cells if c.condition == REFERENCE] or list(cells):
        found = tracking.find_cell_run(experiment, cell)
        if found is not None and found[1] == "FINISHED":
            for story_id, replies in _cell_stories(cell, found[0]).items():
                candidates.setdefault(story_id, {}).update(replies)
    return {story_id: replies[pick_other(story_id, replies)] for story_id, replies in candidates.items()}


def sweep_controls(section: IncrementalConfig, cells: Sequence[CellSpec], judge: JudgeSpec, k: int) -> list[ControlSet]:
    """A sweep's control items for one judge: checklist and quality on K tasks with a story, and each rubric of
    `pairwise_judges` with the judge as that rubric runs it."""
    tasks, stories = select_tasks(cells[0]), sweep_stories(cells)
    refusal = refusal_text()
    sets = [ControlSet(judge, tuple(checklist_controls(tasks, stories, k, refusal)
                                    + quality_controls(tasks, stories, k, judge.rubric)))]
    sets += [ControlSet(entry.judge_spec(judge), tuple(pairwise_controls(tasks, stories, k, entry.rubric, refusal)))
             for entry in section.pairwise_judges]
    return [group for group in sets if group.items]


def control_requests(section: IncrementalConfig, cells: Sequence[CellSpec], judges: Sequence[JudgeSpec],
                     k: int) -> list[RequestCount]:
    """Before any story exists: at most K tasks per judge, each a refusal, another task's story, a shuffled and a
    padded story judged alone, once per repeat of the judge (a story's own verdicts are its cell's, from the request
    cache), and three pairs in both orders per pairwise rubric, once per repeat as well."""
    n = min(k, len(select_tasks(cells[0]))) if cells else 0
    return [RequestCount(judge.model, 4 * n * judge.repeats, judge.max_new_tokens) for judge in judges] + [
        RequestCount(spec.model, 6 * n * spec.repeats, spec.max_new_tokens)
        for judge in judges for spec in (entry.judge_spec(judge) for entry in section.pairwise_judges)]


__all__ = [
    "CONTROL_TEXTS_FILE",
    "checklist_controls",
    "control_requests",
    "incremental_controls",
    "pairwise_controls",
    "quality_controls",
    "refusal_text",
    "sweep_controls",
    "sweep_stories",
]
