"""The incremental-delivery study's Conversations view of its runs: the conversations table its cells log, and each
final story's checklist from its score records beside the requirements of the task the cell ran (read again from
the files the cell's spec names, by the study's own task loaders)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from narrative_eval import tracking
from narrative_eval.records import CellSpec
from narrative_eval.reports.labels import label
from narrative_eval.studies.incremental.cell_tasks import tasks_of_cell
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.vocabulary import SHARDED
from narrative_eval.studies.viewers import Checklist, ConversationView, Requirement

TABLE = "conversations.json"
"""A cell's conversations: one row per turn."""
SCORES = "score_records.json"
"""A cell's score records: the judges' verdicts on its final stories."""

_TASKS: dict[tuple[str, Path], dict[str, WritingTask]] = {}
"""Tasks per (run, repo) once read: a run's tasks are fixed, and its task file is checked against the run's hash."""


def tasks_of_run(run_id: str, repo: Path) -> dict[str, WritingTask]:
    """story_id -> task (brief and checklist) the run ran, its files relative to `repo`; {} when they are gone or
    changed since."""
    if (run_id, repo) not in _TASKS:
        try:
            spec = tracking.load_json_artifact(run_id, "cell_spec.json")
        except Exception:  # a run without its spec (stopped before logging it): its stories have no brief to show
            return {}
        try:
            cell = CellSpec.model_validate(spec or {})
            _TASKS[(run_id, repo)] = {task.story_id: task for task in tasks_of_cell(cell, repo)}
        except (ValidationError, ValueError):  # its task files are gone or changed since
            return {}
    return _TASKS[(run_id, repo)]


@lru_cache(maxsize=256)
def score_records(run_id: str) -> tuple[dict, ...]:
    """A finished run's score records (they never change); none when it logged none."""
    try:
        return tuple(tracking.load_json_artifact(run_id, SCORES) or ())
    except Exception:  # a run that logged no score records (a cell without a judge, a stopped one)
        return ()


def checklist(run_id: str, story: str, repo: Path) -> Checklist | None:
    """The first score record of the story's final reply in the run, its requirements in the task's words."""
    records = [r for r in score_records(run_id) if r.get("story_id") == story]
    if not records:
        return None
    record = records[0]
    task = tasks_of_run(run_id, repo).get(story)
    words = {c.constraint_id: c.requirement for c in task.constraints} if task is not None else {}
    requirements = tuple(Requirement(words.get(item.get("constraint_id"), item.get("constraint_id")),
                                     item.get("score")) for item in record.get("adherence", []))
    quality = tuple((label(key), value) for key, value in (record.get("quality") or {}).items())
    return Checklist(str(record.get("judge")), quality, requirements)


CONVERSATIONS = ConversationView(
    name="conversations", prefix="conv", title="Conversations",
    intro=("Incremental-delivery runs: the brief's shards with the model's reply after each turn, and the final "
           "stories of the FULL and SHARDED conditions side by side with the checklist result of each requirement."),
    empty=("No incremental-delivery sweeps in this tracking store yet. Run one on the embedded models with "
           "`python -m experiments.sweep --config experiments/configs/incremental_embedded.yaml --limit 2` "
           "(or launch that config from the Launch tab), then press Refresh."),
    table=TABLE, item_column="story_id", item_label="Task (story id)", setting_label="System prompt",
    default_condition=SHARDED, checklist=checklist)
"""What the study's Conversations tab shows."""

__all__ = ["CONVERSATIONS", "SCORES", "TABLE", "checklist", "score_records", "tasks_of_run"]
