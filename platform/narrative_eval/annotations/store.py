"""Human ratings of stored outputs: blinded items and ratings per rater, in SQLite.

Both studies validated their LLM judges against blinded human raters. An *item* is what a rater
sees: a context (a passage with its blank, or a writing brief) and one output (pointwise) or two
outputs (pairwise). Which run, model and condition produced an output is stored with the item but
never shown. A rating records the order the outputs were shown in, so pairwise preferences are
stored both as the rater saw them (A/B) and in the item's canonical order, where agreement is computed.

Storage is one SQLite file (default `.cache/annotations.sqlite`, or NARRATIVE_EVAL_ANNOTATIONS);
every rating is committed as soon as it is saved. One rater rates an item once: rating it again
replaces the earlier rating. A rating served by the rate-next order keeps that order's sampling design
(annotations.rate_next): its stratum, the probability the output had of being rated and its inverse, the weight.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
    design text not null default '{}',
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
    """What the outputs answer: the passage with its blank, or the writing brief with its checklist."""
    outputs: tuple[str, ...]
    """One (pointwise) or two (pairwise) outputs, in canonical order (story pairs: FULL first, then SHARDED)."""
    sources: tuple[dict[str, Any], ...] = ()
    """Hidden provenance per output: run_id, model, prompt_setting, condition (stories: judge id -> score-record id)."""
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
    scores: dict[str, int | None] = field(default_factory=dict)
    """Pointwise: dimension -> 1-5 (None = N/A, stories only). Pairwise stories: question -> -2..2 in canonical order."""
    preference: int | None = None
    """Pairwise: signed preference for canonical output 0 (positive) over output 1 (negative), -2..2."""
    label: str = ""
    """Pairwise: the verdict as the rater saw it (e.g. 'A_slightly_better'; stories: the creative-quality one)."""
    seconds: float | None = None
    """Time the rater spent on the item, when known."""
    created_at: float = 0.0
    """Unix time the rating was saved."""
    design: dict[str, Any] = field(default_factory=dict)
    """How the item came to be rated, when an order with known probabilities served it (annotations.rate_next): the
    cell, the stratum, its probability of being rated within the budget and the weight (its inverse)."""


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
            if "design" not in {row["name"] for row in db.execute("pragma table_info(ratings)")}:
                db.execute("alter table ratings add column design text not null default '{}'")  # a store made before

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

    def items(self, kind: Kind | None = None, study: str | None = None) -> list[AnnotationItem]:
        """Stored items, of one kind and/or one study when given."""
        clauses = [(name, value) for name, value in (("kind", kind), ("study", study)) if value is not None]
        query = "select * from items" + (" where " + " and ".join(f"{name} = ?" for name, _ in clauses) if clauses else "")
        with self._connect() as db:
            return [_item_from_row(row) for row in db.execute(query, [value for _, value in clauses])]

    # ------------------------------------------------------------------ ratings

    def save_rating(self, rating: Rating) -> None:
        """Store a rating durably; a rater's second rating of an item replaces the first."""
        if rating.kind == "pairwise" and rating.preference not in (-2, -1, 0, 1, 2):
            raise ValueError(f"a pairwise rating needs a preference in -2..2, got {rating.preference!r}")
        if rating.kind == "pointwise" and not rating.scores:
            raise ValueError("a pointwise rating needs scores")
        self.item(rating.item_id)  # the item must exist, so every rating can be traced to its outputs
        self._write(
            "insert or replace into ratings (item_id, rater, kind, shown_order, scores, preference, label, seconds, "
            "created_at, design) values (?,?,?,?,?,?,?,?,?,?)",
            (rating.item_id, rating.rater, rating.kind, json.dumps(list(rating.shown_order)), json.dumps(rating.scores),
             rating.preference, rating.label, rating.seconds, rating.created_at or time.time(), json.dumps(rating.design)),
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
        created_at=row["created_at"], design=json.loads(row["design"]),
    )
