"""What a rated item is made of, read from a cell run's logged rows: an output's hidden provenance, the judges' scores
of it, and the text it was written into when the data file is gone."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from narrative_eval.data.instances import BLANK_RE
from narrative_eval.records.keys import parse_judge_key
from narrative_eval.stats.cell_scores import JUDGE_ROW_FIELDS


def output_source(run: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """An output's hidden provenance: its run, model, prompt setting, condition and trace (never shown to a rater)."""
    trace_id = row.get("trace_id")
    return {"run_id": run["run_id"], "model": run.get("params.model_id"),
            "prompt_setting": run.get("params.prompt_setting"), "condition": run.get("params.condition"),
            "trace_id": trace_id if isinstance(trace_id, str) else None}


def judge_scores_of(row: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """judge id -> dimension -> score, from a logged table row's judges' columns (narrative_eval.records.keys)."""
    scores: dict[str, dict[str, float | None]] = {}
    for name in row.keys():
        judged = parse_judge_key(str(name))
        if judged is not None and judged[1] not in JUDGE_ROW_FIELDS:
            value = row[name]
            try:
                value = None if value is None or math.isnan(float(value)) else float(value)
            except (TypeError, ValueError):
                value = None
            scores.setdefault(judged[0], {})[judged[1]] = value
    return scores


def problem_from_messages(messages: Any) -> str:
    """Fallback passage when the data file is gone: the paragraph of the last user message that holds the blank."""
    try:
        items = json.loads(messages) if isinstance(messages, str) else messages
        user = [m["content"] for m in items if m.get("role") == "user"][-1]
    except Exception:
        return ""
    for paragraph in re.split(r"\n+", user):
        if BLANK_RE.search(paragraph) and len(paragraph) > 40:
            return paragraph.strip()
    return user


__all__ = ["judge_scores_of", "output_source", "problem_from_messages"]
