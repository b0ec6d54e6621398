"""Creative-writing tasks: load, validate and save the published task formats.

Two files describe a task set:

- tasks JSON: an array of ``{domain, item_id, title, full_instruction, shards: [str, ...]}``;
  ``story_id = f"{domain}_{item_id:03d}"``.
- constraints JSONL: one line per task ``{story_id, domain, item_id, title, constraints:
  [{constraint_id, type, requirement, introduced_at_shard}]}`` with a 0-based shard index.

Errors name the file and line: for the JSON array, the line where the offending element
starts; for the JSONL file, the line of the record. Every problem in both files is collected
and raised together (DataErrors) so a file can be fixed in one pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.jsonl import checked_jsonl
from narrative_eval.errors import read_text
from narrative_eval.studies.incremental.records import Constraint, WritingTask

GENRES: tuple[str, ...] = ("fantasy", "historical_fiction", "mystery", "romance", "science_fiction", "comedy")
"""The six genres of the study (other genre names load too)."""

MIN_SHARDS = 5
"""Fewest shards a task may have."""

MAX_SHARDS = 9
"""Most shards a task may have."""

TASK_FIELDS: tuple[str, ...] = ("domain", "item_id", "title", "full_instruction", "shards")
"""Required keys of a tasks JSON element, in the order files are written."""

CONSTRAINT_LINE_FIELDS: tuple[str, ...] = ("story_id", "domain", "item_id", "title", "constraints")
"""Required keys of a constraints JSONL record."""

CONSTRAINT_FIELDS: tuple[str, ...] = ("constraint_id", "type", "requirement", "introduced_at_shard")
"""Required keys of one checklist item."""

DEFAULT_CONSTRAINTS_NAME = "constraints.jsonl"
"""File looked for next to the tasks JSON when no constraints file is given."""


def story_id_of(domain: str, item_id: int) -> str:
    """The task key the published files use."""
    return f"{domain}_{item_id:03d}"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _skip_space(text: str, offset: int) -> int:
    while offset < len(text) and text[offset] in " \t\r\n":
        offset += 1
    return offset


def iter_json_array(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line, element) for each element of a top-level JSON array, with the line where it starts.

    The array is walked with ``raw_decode`` so every element keeps its position in the file;
    a syntax error raises DataError at the line the decoder stopped on.
    """
    text = read_text(path, "tasks file")
    decoder = json.JSONDecoder()
    offset = _skip_space(text, 0)
    if offset >= len(text) or text[offset] != "[":
        raise DataError(path, _line_of(text, offset), "expected a JSON array of tasks")
    offset = _skip_space(text, offset + 1)
    if offset < len(text) and text[offset] == "]":
        return
    while True:
        start = offset
        try:
            element, offset = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            raise DataError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
        except RecursionError:
            raise DataError(path, _line_of(text, start), "invalid JSON: nested too deeply") from None
        yield _line_of(text, start), element
        offset = _skip_space(text, offset)
        if offset >= len(text):
            raise DataError(path, _line_of(text, offset), "invalid JSON: unterminated array")
        if text[offset] == "]":
            break
        if text[offset] != ",":
            raise DataError(path, _line_of(text, offset), f"invalid JSON: expected ',' or ']', found {text[offset]!r}")
        offset = _skip_space(text, offset + 1)
    rest = _skip_space(text, offset + 1)
    if rest < len(text):
        raise DataError(path, _line_of(text, rest), "invalid JSON: extra data after the array")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_task(element: Any) -> list[str]:
    if not isinstance(element, dict):
        return ["expected a JSON object"]
    missing = [key for key in TASK_FIELDS if key not in element]
    if missing:
        return [f"missing field(s): {', '.join(missing)}"]
    problems = []
    if not isinstance(element["domain"], str) or not element["domain"].strip():
        problems.append("domain must be a non-empty string")
    if not _is_int(element["item_id"]) or element["item_id"] < 0:
        problems.append(f"item_id must be a non-negative integer, got {element['item_id']!r}")
    for key in ("title", "full_instruction"):
        if not isinstance(element[key], str) or not element[key].strip():
            problems.append(f"{key} must be a non-empty string")
    shards = element["shards"]
    if not isinstance(shards, list):
        problems.append("shards must be a list of strings")
    else:
        if not MIN_SHARDS <= len(shards) <= MAX_SHARDS:
            problems.append(f"expected {MIN_SHARDS}-{MAX_SHARDS} shards, got {len(shards)}")
        for k, shard in enumerate(shards):
            if not isinstance(shard, str) or not shard.strip():
                problems.append(f"shard {k} is empty (every shard must be non-empty text)")
    return problems


def _check_constraint_line(record: Any) -> list[str]:
    if not isinstance(record, dict):
        return ["expected a JSON object"]
    missing = [key for key in CONSTRAINT_LINE_FIELDS if key not in record]
    if missing:
        return [f"missing field(s): {', '.join(missing)}"]
    problems = []
    if not isinstance(record["story_id"], str):
        problems.append("story_id must be a string")
    if not isinstance(record["constraints"], list) or not record["constraints"]:
        problems.append("constraints must be a non-empty list (every task needs a checklist)")
        return problems
    seen: set[str] = set()
    for k, item in enumerate(record["constraints"]):
        if not isinstance(item, dict):
            problems.append(f"constraint {k} is not an object")
            continue
        absent = [key for key in CONSTRAINT_FIELDS if key not in item]
        if absent:
            problems.append(f"constraint {k} is missing field(s): {', '.join(absent)}")
            continue
        cid = item["constraint_id"]
        if not isinstance(cid, str) or not cid.strip():
            problems.append(f"constraint {k}: constraint_id must be a non-empty string")
        elif cid in seen:
            problems.append(f"constraint {k}: duplicate constraint_id {cid!r}")
        else:
            seen.add(cid)
        if not isinstance(item["requirement"], str) or not item["requirement"].strip():
            problems.append(f"constraint {k}: requirement must be non-empty text")
        if not isinstance(item["type"], str) or not item["type"].strip():
            problems.append(f"constraint {k}: type must be a non-empty string")
        if not _is_int(item["introduced_at_shard"]):
            problems.append(f"constraint {k}: introduced_at_shard must be an integer")
    return problems


def _read_checklists(
    constraints_path: Path,
    tasks_path: Path,
    tasks: dict[str, tuple[int, dict[str, Any]]],
    invalid_tasks: set[str],
    errors: list[DataError],
) -> tuple[dict[str, tuple[Constraint, ...]], set[str]]:
    """Each task's checklist from the constraints file, checked against its task; problems go to `errors`.
    Returns the checklists and the stories whose checklist line was rejected (already reported)."""
    checklists: dict[str, tuple[Constraint, ...]] = {}
    checklist_lines: dict[str, int] = {}
    rejected: set[str] = set()  # stories whose checklist line was invalid (already reported)

    def check(record: dict[str, Any]) -> list[str]:
        problems = _check_constraint_line(record)
        if problems and isinstance(record.get("story_id"), str):
            rejected.add(record["story_id"])
        return problems

    errors_before, good_lines = len(errors), 0
    for line_no, record in checked_jsonl(constraints_path, "constraints file", check, errors):
        good_lines += 1
        sid = record["story_id"]
        if sid in invalid_tasks and sid not in tasks:
            continue
        if sid not in tasks:
            errors.append(DataError(constraints_path, line_no, f"unknown story_id {sid!r} (not in {tasks_path.name})"))
            continue
        if sid in checklists:
            errors.append(
                DataError(constraints_path, line_no, f"second checklist for {sid!r} (first at line {checklist_lines[sid]})")
            )
            continue
        task = tasks[sid][1]
        if record["domain"] != task["domain"] or record["item_id"] != task["item_id"]:
            errors.append(
                DataError(constraints_path, line_no, f"domain/item_id disagree with story_id {sid!r} in the tasks file")
            )
            rejected.add(sid)
        n_shards = len(task["shards"])
        bad = [
            f"constraint {item['constraint_id']!r}: introduced_at_shard {item['introduced_at_shard']} "
            f"outside the task's {n_shards} shards (0-{n_shards - 1})"
            for item in record["constraints"]
            if not 0 <= item["introduced_at_shard"] < n_shards
        ]
        if bad:
            errors.extend(DataError(constraints_path, line_no, p) for p in bad)
            rejected.add(sid)
            continue
        checklists[sid] = tuple(Constraint(**{k: item[k] for k in CONSTRAINT_FIELDS}) for item in record["constraints"])
        checklist_lines[sid] = line_no
    if not good_lines and len(errors) == errors_before:  # no line at all: one problem for the file, not one per task
        errors.append(DataError(constraints_path, None, "no checklists: the file has no records (one JSON object per line)"))
        rejected.update(tasks)
    return checklists, rejected


def load_tasks(tasks_json: str | Path, constraints_jsonl: str | Path | None = None) -> list[WritingTask]:
    """Read a task set and its checklist; raise DataErrors naming file:line for every problem.

    ``constraints_jsonl`` defaults to ``constraints.jsonl`` next to the tasks file. Checks:
    every element has the fields, 5-9 non-empty shards, unique story ids; every constraints
    record names a known story (with matching domain and item_id), holds a non-empty checklist
    whose ``introduced_at_shard`` lies inside that task's shard list; every task has a checklist; neither
    file is empty.
    """
    tasks_path = Path(tasks_json)
    constraints_path = (
        Path(constraints_jsonl) if constraints_jsonl is not None else tasks_path.with_name(DEFAULT_CONSTRAINTS_NAME)
    )
    errors: list[DataError] = []
    if not tasks_path.is_file():
        raise DataErrors([DataError(tasks_path, None, "tasks file not found")])
    if not constraints_path.is_file():
        raise DataErrors([DataError(constraints_path, None, "constraints file not found")])

    tasks: dict[str, tuple[int, dict[str, Any]]] = {}
    invalid_tasks: set[str] = set()  # reported already; their checklists are not checked against them
    try:
        elements = list(iter_json_array(tasks_path))
    except DataError as error:
        raise DataErrors([error]) from error
    if not elements:  # an empty array would run a sweep on nothing and report it as done
        errors.append(DataError(tasks_path, None, "no tasks: the JSON array is empty"))
    for line, element in elements:
        problems = _check_task(element)
        if problems:
            errors.extend(DataError(tasks_path, line, p) for p in problems)
            if isinstance(element, dict) and isinstance(element.get("domain"), str) and _is_int(element.get("item_id")):
                invalid_tasks.add(story_id_of(element["domain"], element["item_id"]))
            continue
        sid = story_id_of(element["domain"], element["item_id"])
        if sid in tasks:
            errors.append(DataError(tasks_path, line, f"duplicate story id {sid!r} (first at line {tasks[sid][0]})"))
            continue
        tasks[sid] = (line, element)

    checklists, rejected = _read_checklists(constraints_path, tasks_path, tasks, invalid_tasks, errors)

    for sid, (line, _) in tasks.items():
        if sid not in checklists and sid not in rejected:
            errors.append(DataError(tasks_path, line, f"task {sid!r} has no checklist in {constraints_path.name}"))
    if errors:
        raise DataErrors(errors)
    return [
        WritingTask(
            domain=element["domain"],
            item_id=element["item_id"],
            title=element["title"],
            full_instruction=element["full_instruction"],
            shards=tuple(element["shards"]),
            constraints=checklists[sid],
        )
        for sid, (_, element) in tasks.items()
    ]


def save_tasks(tasks: Iterable[WritingTask], tasks_json: str | Path, constraints_jsonl: str | Path | None = None) -> Path:
    """Write a task set in the published formats (tasks JSON + constraints JSONL); return the tasks path."""
    tasks = list(tasks)
    tasks_path = Path(tasks_json)
    constraints_path = (
        Path(constraints_jsonl) if constraints_jsonl is not None else tasks_path.with_name(DEFAULT_CONSTRAINTS_NAME)
    )
    tasks_path.parent.mkdir(parents=True, exist_ok=True)
    constraints_path.parent.mkdir(parents=True, exist_ok=True)
    array = [
        {"domain": t.domain, "item_id": t.item_id, "title": t.title, "full_instruction": t.full_instruction, "shards": list(t.shards)}
        for t in tasks
    ]
    tasks_path.write_text(json.dumps(array, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with constraints_path.open("w", encoding="utf-8") as handle:
        for t in tasks:
            line = {
                "story_id": t.story_id,
                "domain": t.domain,
                "item_id": t.item_id,
                "title": t.title,
                "constraints": [c.model_dump() for c in t.constraints],
            }
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return tasks_path
