"""Ratings as rows: the store's ratings exported with their provenance, one sweep's ratings for its report,
and ratings made outside the app read from a CSV."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from narrative_eval.annotations.store import AnnotationStore
from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.errors import read_text


def ratings_frame_rows(store: AnnotationStore, rater: str | None = None) -> list[dict[str, Any]]:
    """Flat rows for export or display: one per rating, provenance included (for analysis, never for raters)."""
    items = {item.item_id: item for item in store.items()}
    rows = []
    for rating in store.ratings(rater=rater):
        item = items.get(rating.item_id)
        row: dict[str, Any] = {"item_id": rating.item_id, "rater": rating.rater, "kind": rating.kind,
                               "preference": rating.preference, "label": rating.label,
                               "created_at": rating.created_at}
        row.update({f"score/{k}": v for k, v in rating.scores.items()})
        row.update({f"design/{k}": v for k, v in rating.design.items()})
        if item is not None:
            row.update({"sweep": item.sweep, "instance_id": item.instance_id, "seed": item.seed})
            for index, source in enumerate(item.sources):
                row.update({f"output{index}/{k}": v for k, v in source.items()})
        rows.append(row)
    return rows


RATING_KEYS = ("rater", "model", "prompt_setting", "instance_id", "seed")
"""Columns that locate one rated output in a ratings table (CSV or store); the rest are 1-5 dimension scores."""


def sweep_ratings(store: AnnotationStore, sweep: str, study: str | None = None) -> list[dict[str, Any]]:
    """Pointwise ratings of one sweep's outputs (of one study's items when `study`, its MLflow experiment, is given),
    one row per (rater, output): RATING_KEYS + dimension scores (`instance_id`: the study's item id)."""
    items = {item.item_id: item for item in store.items("pointwise", study) if item.sweep == sweep}
    rows = []
    for rating in store.ratings(kind="pointwise"):
        item = items.get(rating.item_id)
        if item is None or not item.sources:
            continue
        source = item.sources[0]
        rows.append({"rater": rating.rater, "model": source.get("model"), "prompt_setting": source.get("prompt_setting"),
                     "instance_id": item.instance_id, "seed": item.seed, **rating.scores})
    return rows


def read_ratings_csv(path: str | Path, dimensions: Sequence[str]) -> list[dict[str, Any]]:
    """Human ratings made outside the app: a CSV with RATING_KEYS (seed optional, default 0) and one 1-5 column per
    dimension (a blank cell is a missing rating). Every bad row is reported with its file and line."""
    import csv

    path = Path(path)
    with io.StringIO(read_text(path, "ratings file"), newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in RATING_KEYS if c != "seed" and c not in header]
        if missing:
            raise DataError(path, 1, f"missing column(s) {', '.join(missing)}")
        scored = [d for d in dimensions if d in header]
        if not scored:
            raise DataError(path, 1, f"no dimension column; expected some of {', '.join(dimensions)}")
        rows, errors = [], []
        for line, record in enumerate(reader, start=2):
            problems = [f"empty {c}" for c in ("rater", "model", "prompt_setting", "instance_id") if not (record.get(c) or "").strip()]
            row: dict[str, Any] = {c: (record.get(c) or "").strip() for c in ("rater", "model", "prompt_setting", "instance_id")}
            try:
                row["seed"] = int(record.get("seed") or 0)
            except ValueError:
                problems.append(f"seed {record.get('seed')!r} is not an integer")
            for dimension in scored:
                cell = (record.get(dimension) or "").strip()
                if not cell:
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    value = math.nan
                if not 1 <= value <= 5:
                    problems.append(f"{dimension} = {cell!r} is not a score in 1-5")
                else:
                    row[dimension] = value
            if problems:
                errors.append(DataError(path, line, "; ".join(problems)))
            else:
                rows.append(row)
    if errors:
        raise DataErrors(errors)
    return rows
