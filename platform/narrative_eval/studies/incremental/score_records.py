"""Creative-writing score records: import and export in the published JSONL format.

One JSON object per line:
``{record_id, story_id, genre, model, condition, judge, adherence: [{constraint_id, score}],
quality: {craft, structure_coherence, originality, genre_effectiveness, characterization}}``
with item scores in {0, 0.5, 1}, quality scores integers 1-5 and characterization allowed to be
null. Import checks every line and raises DataErrors listing each bad one as file:line, so
published or external judgments enter the analysis only when they are well formed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.jsonl import checked_jsonl
from narrative_eval.records import CellSpec
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.turns import CONDITIONS
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS

RECORD_FIELDS: tuple[str, ...] = ("record_id", "story_id", "genre", "model", "condition", "judge", "adherence", "quality")
"""Fields every record carries, in the order they are written."""

ITEM_SCORES: tuple[float, ...] = (0.0, 0.5, 1.0)
"""Allowed checklist item scores."""


NULLABLE_QUALITY: tuple[str, ...] = ("characterization",)
"""Dimensions that may be null (not applicable)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def record_problems(data: Any) -> list[str]:
    """Everything wrong with one parsed record (empty when it is valid)."""
    if not isinstance(data, dict):
        return ["expected a JSON object"]
    missing = [key for key in RECORD_FIELDS if key not in data]
    problems = [f"missing field(s): {', '.join(missing)}"] if missing else []
    unknown = sorted(set(data) - set(RECORD_FIELDS))
    if unknown:
        problems.append(f"unknown field(s): {', '.join(unknown)}")
    for key in ("record_id", "story_id", "genre", "model", "judge"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            problems.append(f"{key} must be a non-empty string")
    if "condition" in data and data["condition"] not in CONDITIONS:
        problems.append(f"unknown condition {data['condition']!r} (expected one of {', '.join(CONDITIONS.names())})")
    if "adherence" in data:
        items = data["adherence"]
        if not isinstance(items, list) or not items:
            problems.append("adherence must be a non-empty list of {constraint_id, score}")
        else:
            for k, item in enumerate(items):
                if not isinstance(item, dict) or "constraint_id" not in item or "score" not in item:
                    problems.append(f"adherence item {k} must have constraint_id and score")
                elif not _is_number(item["score"]) or float(item["score"]) not in ITEM_SCORES:
                    problems.append(f"adherence item {k} ({item['constraint_id']}): score {item['score']!r} not in {{0, 0.5, 1}}")
    if "quality" in data:
        quality = data["quality"]
        if not isinstance(quality, dict):
            problems.append("quality must be an object")
        else:
            absent = [key for key in QUALITY_FIELDS if key not in quality and key not in NULLABLE_QUALITY]
            if absent:
                problems.append(f"quality is missing {', '.join(absent)}")
            extra = sorted(set(quality) - set(QUALITY_FIELDS))
            if extra:
                problems.append(f"unknown quality dimension(s): {', '.join(extra)}")
            for key in QUALITY_FIELDS:
                value = quality.get(key)
                if value is None:
                    if key in quality and key not in NULLABLE_QUALITY:
                        problems.append(f"quality {key} may not be null")
                    continue
                if not _is_number(value) or float(value) != int(value) or not 1 <= value <= 5:
                    problems.append(f"quality {key} {value!r} outside the 1-5 integer scale")
    return problems


def load_score_records(path: str | Path) -> list[ScoreRecord]:
    """Read a score-record JSONL file; raise DataErrors naming file:line for every bad record."""
    path = Path(path)
    errors: list[DataError] = []
    records: list[ScoreRecord] = []
    first_line: dict[str, int] = {}
    for line_no, data in checked_jsonl(path, "score file", record_problems, errors):
        if data["record_id"] in first_line:
            errors.append(
                DataError(path, line_no, f"duplicate record_id {data['record_id']!r} (first at line {first_line[data['record_id']]})")
            )
            continue
        first_line[data["record_id"]] = line_no
        quality = {key: (int(data["quality"][key]) if data["quality"].get(key) is not None else None) for key in QUALITY_FIELDS}
        adherence = [{"constraint_id": str(item["constraint_id"]), "score": float(item["score"])} for item in data["adherence"]]
        records.append(ScoreRecord(**{**data, "adherence": adherence, "quality": quality}))
    if errors:
        raise DataErrors(errors)
    return records


def save_score_records(records: Iterable[ScoreRecord], path: str | Path) -> Path:
    """Write score records as JSONL (one record a line, fields in the published order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            data = record.model_dump(mode="json")
            data["adherence"] = [{**item, "score": item_score(item["score"])} for item in data["adherence"]]
            handle.write(json.dumps({key: data[key] for key in RECORD_FIELDS}, ensure_ascii=False) + "\n")
    return path


def item_score(value: float) -> float | int:
    """A checklist score as the published files write it: 0 and 1 as integers, 0.5 as a float."""
    return int(value) if float(value).is_integer() else float(value)


def model_label(cell: CellSpec) -> str:
    """The model name score records carry: the model id, plus the system prompt when it is not the default."""
    return cell.model.id if cell.prompt_setting in ("", "default") else f"{cell.model.id} [{cell.prompt_setting}]"


def record_id(cell: CellSpec, story_id: str, seed: int, judge_id: str) -> str:
    """The id of the score record one judge gives a cell's final reply to one story and seed."""
    return ScoreRecord.make_id(model_label(cell), cell.condition, story_id, seed, judge_id)
