"""Creative-writing task files: the shipped set, round trips, and file:line validation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from narrative_eval.data.errors import DataErrors
from narrative_eval.studies.incremental.tasks import GENRES, load_tasks, save_tasks

REPO = Path(__file__).resolve().parents[2]
SHIPPED_TASKS = REPO / "data" / "creative" / "tasks.json"
SHIPPED_CONSTRAINTS = REPO / "data" / "creative" / "constraints.jsonl"


def _task(domain: str = "fantasy", item_id: int = 1, shards: list[str] | None = None) -> dict:
    shards = shards if shards is not None else [f"Shard {k}." for k in range(5)]
    return {"domain": domain, "item_id": item_id, "title": "T", "full_instruction": " ".join(shards) or "x", "shards": shards}


def _checklist(story_id: str = "fantasy_001", at: int = 0, domain: str = "fantasy", item_id: int = 1) -> dict:
    return {
        "story_id": story_id,
        "domain": domain,
        "item_id": item_id,
        "title": "T",
        "constraints": [{"constraint_id": "c1", "type": "premise", "requirement": "A premise.", "introduced_at_shard": at}],
    }


def _write(tmp_path: Path, tasks: list[dict], checklists: list[dict]) -> tuple[Path, Path]:
    tasks_path = tmp_path / "tasks.json"
    constraints_path = tmp_path / "constraints.jsonl"
    tasks_path.write_text(json.dumps(tasks, indent=2))
    constraints_path.write_text("".join(json.dumps(c) + "\n" for c in checklists))
    return tasks_path, constraints_path


def _errors(call) -> list[str]:
    with pytest.raises(DataErrors) as caught:
        call()
    return [str(e) for e in caught.value.errors]


def test_shipped_task_set_loads_with_four_tasks_per_genre():
    tasks = load_tasks(SHIPPED_TASKS, SHIPPED_CONSTRAINTS)
    counts = Counter(t.domain for t in tasks)
    assert set(counts) == set(GENRES)
    assert min(counts.values()) >= 4
    for task in tasks:
        assert 5 <= len(task.shards) <= 9
        # Both deliveries carry the same words: the full brief is the shards joined.
        assert task.full_instruction == " ".join(task.shards)
        covered = {c.introduced_at_shard for c in task.constraints}
        assert covered == set(range(len(task.shards))), f"{task.story_id}: a shard adds no checklist item"


def test_constraints_default_to_the_sibling_file():
    assert [t.story_id for t in load_tasks(SHIPPED_TASKS)] == [t.story_id for t in load_tasks(SHIPPED_TASKS, SHIPPED_CONSTRAINTS)]


def test_save_then_load_round_trips(tmp_path):
    tasks = load_tasks(SHIPPED_TASKS, SHIPPED_CONSTRAINTS)
    save_tasks(tasks, tmp_path / "t.json", tmp_path / "c.jsonl")
    assert load_tasks(tmp_path / "t.json", tmp_path / "c.jsonl") == tasks


def test_empty_shard_is_reported_at_the_line_of_its_task(tmp_path):
    tasks = [_task(item_id=1), _task(item_id=2, shards=["One.", "Two.", "  ", "Four.", "Five."])]
    tasks_path, constraints_path = _write(tmp_path, tasks, [_checklist(), _checklist("fantasy_002", item_id=2)])
    text = tasks_path.read_text().splitlines()
    second_start = next(i for i, line in enumerate(text, start=1) if i > 2 and line.strip() == "{")
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors == [f"{tasks_path}:{second_start}: shard 2 is empty (every shard must be non-empty text)"]


def test_shard_count_outside_five_to_nine(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task(shards=["a.", "b.", "c."])], [_checklist()])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors == [f"{tasks_path}:2: expected 5-9 shards, got 3"]


def test_introduced_at_shard_outside_the_shard_list(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task(), _task(item_id=2)], [_checklist(), _checklist("fantasy_002", at=5, item_id=2)])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert len(errors) == 1
    assert errors[0].startswith(f"{constraints_path}:2: constraint 'c1': introduced_at_shard 5 outside")


def test_duplicate_story_ids(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task(), _task()], [_checklist()])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert len(errors) == 1 and "duplicate story id 'fantasy_001' (first at line 2)" in errors[0]
    assert errors[0].startswith(f"{tasks_path}:")


def test_unknown_story_and_missing_checklist(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task()], [_checklist("mystery_009", domain="mystery", item_id=9)])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert f"{constraints_path}:1: unknown story_id 'mystery_009' (not in tasks.json)" in errors
    assert f"{tasks_path}:2: task 'fantasy_001' has no checklist in constraints.jsonl" in errors


def test_empty_task_and_constraints_files_are_errors_naming_them(tmp_path):
    """An empty task set used to load as no tasks, and a sweep on it finished with nothing run."""
    tasks_path, constraints_path = _write(tmp_path, [], [])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors == [f"{tasks_path}: no tasks: the JSON array is empty",
                      f"{constraints_path}: no checklists: the file has no records (one JSON object per line)"]


def test_an_empty_constraints_file_is_one_error_not_one_per_task(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task(item_id=1), _task(item_id=2)], [])
    constraints_path.write_text("\n\n")  # blank lines hold no record either
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors == [f"{constraints_path}: no checklists: the file has no records (one JSON object per line)"]


def test_bad_json_in_each_file(tmp_path):
    tasks_path, constraints_path = _write(tmp_path, [_task()], [_checklist()])
    constraints_path.write_text(constraints_path.read_text() + "{not json\n")
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors[0].startswith(f"{constraints_path}:2: invalid JSON")

    tasks_path.write_text('[\n  {"domain": "fantasy",\n   "item_id": 1,,\n')
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert errors[0].startswith(f"{tasks_path}:3: invalid JSON")


def test_missing_fields_are_named(tmp_path):
    broken = _task()
    del broken["shards"]
    tasks_path, constraints_path = _write(tmp_path, [broken], [_checklist()])
    errors = _errors(lambda: load_tasks(tasks_path, constraints_path))
    assert f"{tasks_path}:2: missing field(s): shards" in errors
