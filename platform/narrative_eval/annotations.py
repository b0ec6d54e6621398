"""Human ratings of stored outputs: blinded items, ratings per rater in SQLite, agreement with a judge.

Both studies validated their LLM judges against blinded human raters. An *item* is what a rater
sees: a context (a passage with its blank, or a writing brief) and one output (pointwise) or two
outputs (pairwise). Which run, model and condition produced an output is stored with the item but
never shown. A rating records the order the outputs were shown in, so pairwise preferences are
stored both as the rater saw them (A/B) and in the item's canonical order, where agreement is computed.

Storage is one SQLite file (default `.cache/annotations.sqlite`, or NARRATIVE_EVAL_ANNOTATIONS);
every rating is committed as soon as it is saved. One rater rates an item once: rating it again
replaces the earlier rating.
"""

from __future__ import annotations

import io
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from narrative_eval.judges.agreement import cohen_kappa, exact_agreement, krippendorff_alpha, mae, spearman
from narrative_eval.records import stable_hash

DEFAULT_PATH = ".cache/annotations.sqlite"
"""Where ratings are stored when no path is given (relative to the working directory)."""

ENV_PATH = "NARRATIVE_EVAL_ANNOTATIONS"
"""Environment variable that overrides the default storage path."""

Kind = Literal["pointwise", "pairwise"]

_SCHEMA = """
create table if not exists items (
    item_id text primary key,
    kind text not null,
    study text not null,
    sweep text not null,
    instance_id text not null,
    seed integer not null,
    context text not null,
    outputs text not null,
    sources text not null,
    judge_scores text not null,
    created_at real not null
);
create table if not exists ratings (
    item_id text not null references items(item_id),
    rater text not null,
    kind text not null,
    shown_order text not null,
    scores text not null,
    preference integer,
    label text not null default '',
    seconds real,
    created_at real not null,
    primary key (item_id, rater)
);
create index if not exists ratings_by_rater on ratings(rater);
"""


def default_path() -> Path:
    """NARRATIVE_EVAL_ANNOTATIONS if set, else .cache/annotations.sqlite."""
    return Path(os.environ.get(ENV_PATH) or DEFAULT_PATH)


def item_key(kind: Kind, sweep: str, instance_id: str, seed: int, run_ids: Sequence[str]) -> str:
    """Opaque, stable item id: the same outputs always make the same item, whatever order runs are given in."""
    return stable_hash([kind, sweep, instance_id, seed, sorted(run_ids)], 16)


@dataclass(frozen=True)
class AnnotationItem:
    """What one rater judges: a context and one or two outputs, with their hidden provenance."""

    item_id: str
    """Opaque id (see item_key); the only handle a rater's page holds."""
    kind: Kind
    """pointwise (one output, five 1-5 ratings) or pairwise (two outputs, one preference)."""
    study: str
    """infilling or incremental-delivery."""
    sweep: str
    """The sweep the outputs come from."""
    instance_id: str
    """Instance (infilling) or story id (incremental-delivery)."""
    seed: int
    """The cell seed of the outputs."""
    context: str
    """What the outputs answer: the passage with its blank, or the writing brief."""
    outputs: tuple[str, ...]
    """One (pointwise) or two (pairwise) outputs, in canonical order."""
    sources: tuple[dict[str, Any], ...] = ()
    """Hidden provenance per output: run_id, model, prompt_setting, condition."""
    judge_scores: tuple[dict[str, dict[str, float | None]], ...] = ()
    """Per output: judge id -> dimension -> the judge's score, captured when the item was made."""


@dataclass(frozen=True)
class Rating:
    """One rater's judgment of one item."""

    item_id: str
    """The rated item."""
    rater: str
    """Who rated (a name the rater types; ratings are kept per rater)."""
    kind: Kind
    """pointwise or pairwise (the item's kind)."""
    shown_order: tuple[int, ...]
    """Canonical output index shown in each position: (1, 0) means output 1 was shown as A."""
    scores: dict[str, int] = field(default_factory=dict)
    """Pointwise: dimension -> 1-5."""
    preference: int | None = None
    """Pairwise: signed preference for canonical output 0 (positive) over output 1 (negative), -2..2."""
    label: str = ""
    """Pairwise: the verdict as the rater saw it (e.g. 'A_slightly_better')."""
    seconds: float | None = None
    """Time the rater spent on the item, when known."""
    created_at: float = 0.0
    """Unix time the rating was saved."""


def canonical_preference(shown_preference: int, shown_order: Sequence[int]) -> int:
    """A preference for the output shown as A, turned into a preference for canonical output 0."""
    return shown_preference if tuple(shown_order)[0] == 0 else -shown_preference


class AnnotationStore:
    """Items and ratings in one SQLite file, safe to share between the app's worker threads."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.row_factory = sqlite3.Row
        return db

    def _write(self, sql: str, values: Sequence[Any]) -> None:
        with self._lock, self._connect() as db:
            db.execute(sql, values)

    # ------------------------------------------------------------------ items

    def add_item(self, item: AnnotationItem) -> None:
        """Store an item (kept as first stored when it already exists)."""
        self._write(
            "insert or ignore into items values (?,?,?,?,?,?,?,?,?,?,?)",
            (item.item_id, item.kind, item.study, item.sweep, item.instance_id, item.seed, item.context,
             json.dumps(list(item.outputs)), json.dumps(list(item.sources)), json.dumps(list(item.judge_scores)),
             time.time()),
        )

    def item(self, item_id: str) -> AnnotationItem:
        with self._connect() as db:
            row = db.execute("select * from items where item_id = ?", (item_id,)).fetchone()
        if row is None:
            raise KeyError(f"no annotation item {item_id!r} in {self.path}")
        return _item_from_row(row)

    def items(self, kind: Kind | None = None) -> list[AnnotationItem]:
        query, values = "select * from items", ()
        if kind is not None:
            query, values = query + " where kind = ?", (kind,)
        with self._connect() as db:
            return [_item_from_row(row) for row in db.execute(query, values)]

    # ------------------------------------------------------------------ ratings

    def save_rating(self, rating: Rating) -> None:
        """Store a rating durably; a rater's second rating of an item replaces the first."""
        if rating.kind == "pairwise" and rating.preference not in (-2, -1, 0, 1, 2):
            raise ValueError(f"a pairwise rating needs a preference in -2..2, got {rating.preference!r}")
        if rating.kind == "pointwise" and not rating.scores:
            raise ValueError("a pointwise rating needs scores")
        self.item(rating.item_id)  # the item must exist, so every rating can be traced to its outputs
        self._write(
            "insert or replace into ratings values (?,?,?,?,?,?,?,?,?)",
            (rating.item_id, rating.rater, rating.kind, json.dumps(list(rating.shown_order)), json.dumps(rating.scores),
             rating.preference, rating.label, rating.seconds, rating.created_at or time.time()),
        )

    def ratings(self, rater: str | None = None, kind: Kind | None = None) -> list[Rating]:
        clauses, values = [], []
        if rater is not None:
            clauses.append("rater = ?")
            values.append(rater)
        if kind is not None:
            clauses.append("kind = ?")
            values.append(kind)
        query = "select * from ratings" + (" where " + " and ".join(clauses) if clauses else "") + " order by created_at"
        with self._connect() as db:
            return [_rating_from_row(row) for row in db.execute(query, values)]

    def rated_item_ids(self, rater: str) -> set[str]:
        with self._connect() as db:
            return {row[0] for row in db.execute("select item_id from ratings where rater = ?", (rater,))}

    def counts(self) -> dict[str, dict[str, int]]:
        """rater -> kind -> number of ratings."""
        out: dict[str, dict[str, int]] = {}
        with self._connect() as db:
            for row in db.execute("select rater, kind, count(*) from ratings group by rater, kind"):
                out.setdefault(row[0], {})[row[1]] = row[2]
        return out


def _item_from_row(row: sqlite3.Row) -> AnnotationItem:
    return AnnotationItem(
        item_id=row["item_id"], kind=row["kind"], study=row["study"], sweep=row["sweep"],
        instance_id=row["instance_id"], seed=row["seed"], context=row["context"],
        outputs=tuple(json.loads(row["outputs"])), sources=tuple(json.loads(row["sources"])),
        judge_scores=tuple(json.loads(row["judge_scores"])),
    )


def _rating_from_row(row: sqlite3.Row) -> Rating:
    return Rating(
        item_id=row["item_id"], rater=row["rater"], kind=row["kind"], shown_order=tuple(json.loads(row["shown_order"])),
        scores=json.loads(row["scores"]), preference=row["preference"], label=row["label"], seconds=row["seconds"],
        created_at=row["created_at"],
    )


# --------------------------------------------------------------------------- agreement with the judge


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _judge_dimension(item: AnnotationItem, output: int, judge_id: str, dimension: str) -> float | None:
    if output >= len(item.judge_scores):
        return None
    return _number(item.judge_scores[output].get(judge_id, {}).get(dimension))


def judge_ids(store: AnnotationStore) -> list[str]:
    """Judges whose scores were captured with the stored items."""
    found: set[str] = set()
    for item in store.items():
        for scores in item.judge_scores:
            found.update(scores)
    return sorted(found)


def pointwise_agreement(
    store: AnnotationStore, judge_id: str, dimensions: Iterable[str], scale: Sequence[int] = (1, 2, 3, 4, 5)
) -> list[dict[str, Any]]:
    """Per dimension: human vs judge on the same outputs (quadratic-weighted kappa, Spearman, MAE, exact agreement).

    Every (rater, item) pair counts once; items the judge failed on are left out.
    """
    items = {item.item_id: item for item in store.items("pointwise")}
    ratings = [r for r in store.ratings(kind="pointwise") if r.item_id in items]
    rows = []
    for dimension in dimensions:
        human = [_number(r.scores.get(dimension)) for r in ratings]
        judge = [_judge_dimension(items[r.item_id], 0, judge_id, dimension) for r in ratings]
        n = sum(h is not None and j is not None for h, j in zip(human, judge))
        # Judges may give non-integer scores; kappa needs categories, so they are rounded onto the scale.
        judge_cat = [None if j is None else int(min(max(round(j), min(scale)), max(scale))) for j in judge]
        human_cat = [None if h is None else int(h) for h in human]
        rho = spearman(human, judge, n_boot=500) if n >= 3 else None
        rows.append({
            "dimension": dimension,
            "n": n,
            "kappa_quadratic": cohen_kappa(human_cat, judge_cat, weights="quadratic", labels=list(scale)) if n else math.nan,
            "spearman": rho.estimate if rho else math.nan,
            "spearman_lo": rho.low if rho else math.nan,
            "spearman_hi": rho.high if rho else math.nan,
            "mae": mae(human, judge) if n else math.nan,
            "exact": exact_agreement(human_cat, judge_cat) if n else math.nan,
        })
    return rows


def judge_preference(item: AnnotationItem, judge_id: str, dimensions: Sequence[str]) -> int | None:
    """The judge's implied preference between an item's two outputs: sign of the difference of mean scores."""
    means = []
    for output in (0, 1):
        values = [_judge_dimension(item, output, judge_id, d) for d in dimensions]
        values = [v for v in values if v is not None]
        if not values:
            return None
        means.append(sum(values) / len(values))
    difference = means[0] - means[1]
    return 0 if abs(difference) < 1e-9 else (1 if difference > 0 else -1)


def pairwise_agreement(store: AnnotationStore, judge_id: str, dimensions: Sequence[str]) -> dict[str, Any]:
    """Direction of human preferences vs the judge's implied preferences: exact agreement and Cohen's kappa
    over {prefers first, tie, prefers second}, plus the share of non-tied pairs where both pick the same output."""
    items = {item.item_id: item for item in store.items("pairwise")}
    human, judge = [], []
    for rating in store.ratings(kind="pairwise"):
        item = items.get(rating.item_id)
        if item is None or rating.preference is None:
            continue
        human.append((rating.preference > 0) - (rating.preference < 0))
        judge.append(judge_preference(item, judge_id, dimensions))
    n = sum(j is not None for j in judge)
    decided = [(h, j) for h, j in zip(human, judge) if j is not None and h != 0 and j != 0]
    return {
        "judge": judge_id,
        "n": n,
        "exact": exact_agreement(human, judge) if n else math.nan,
        "kappa": cohen_kappa(human, judge, labels=[-1, 0, 1]) if n else math.nan,
        "same_winner_share": (sum(h == j for h, j in decided) / len(decided)) if decided else math.nan,
        "n_decided": len(decided),
    }


def rater_agreement(store: AnnotationStore, dimensions: Iterable[str]) -> list[dict[str, Any]]:
    """Inter-rater reliability per pointwise dimension: Krippendorff's ordinal alpha over the raters x items matrix."""
    ratings = store.ratings(kind="pointwise")
    raters = sorted({r.rater for r in ratings})
    item_ids = sorted({r.item_id for r in ratings})
    by_key = {(r.rater, r.item_id): r for r in ratings}
    rows = []
    for dimension in dimensions:
        matrix: list[list[float | None]] = [
            [_number(by_key[(rater, item)].scores.get(dimension)) if (rater, item) in by_key else None for item in item_ids]
            for rater in raters
        ]
        shared = sum(sum(row[i] is not None for row in matrix) >= 2 for i in range(len(item_ids)))
        alpha = krippendorff_alpha(matrix, "ordinal") if len(raters) >= 2 and shared else math.nan
        rows.append({"dimension": dimension, "raters": len(raters), "items_rated_twice": shared, "alpha": alpha})
    return rows


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
        if item is not None:
            row.update({"sweep": item.sweep, "instance_id": item.instance_id, "seed": item.seed})
            for index, source in enumerate(item.sources):
                row.update({f"output{index}/{k}": v for k, v in source.items()})
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- ratings for a sweep's report

RATING_KEYS = ("rater", "model", "prompt_setting", "instance_id", "seed")
"""Columns that locate one rated output in a ratings table (CSV or store); the rest are 1-5 dimension scores."""


def sweep_ratings(store: AnnotationStore, sweep: str) -> list[dict[str, Any]]:
    """Pointwise ratings of one sweep's outputs, one row per (rater, output): RATING_KEYS + dimension scores."""
    items = {item.item_id: item for item in store.items("pointwise") if item.sweep == sweep}
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

    from narrative_eval.data.errors import DataError, DataErrors
    from narrative_eval.errors import read_text

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


__all__ = [
    "DEFAULT_PATH",
    "RATING_KEYS",
    "ENV_PATH",
    "AnnotationItem",
    "AnnotationStore",
    "Rating",
    "canonical_preference",
    "default_path",
    "item_key",
    "judge_ids",
    "judge_preference",
    "pairwise_agreement",
    "pointwise_agreement",
    "rater_agreement",
    "ratings_frame_rows",
    "read_ratings_csv",
    "sweep_ratings",
]
