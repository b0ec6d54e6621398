"""Ratings of incremental-delivery stories out of the annotation store, in the study's human-validation formats
(stats.human_records): pointwise ratings, pairwise verdicts and the pairwise cases.

A story item's outputs are final stories; each output's source holds the score records of that response
(`records`: judge id -> record id), so a rating is exported under the record id of the judge the export is
made for. A pairwise item holds the FULL story first and the SHARDED one second, the primary order of its
case (record_a = FULL). Its rating keeps both five-level verdicts in that order; on export the order the rater
saw is restored ("reversed" when SHARDED was shown as A) and the verdicts are written as the rater saw them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narrative_eval.annotations.store import AnnotationItem, AnnotationStore, Rating, canonical_preference
from narrative_eval.studies.incremental.human_records import (
    PairCase,
    PairwiseVerdict,
    PointwiseRating,
    save_pair_cases,
    save_pairwise_verdicts,
    save_pointwise_ratings,
)
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.incremental.vocabulary import (
    LEVEL_SCORE,
    NAME,
    PAIR_CONDITIONS,
    PAIRWISE_DIMENSIONS,
    SCORE_LEVEL,
    shown_order,
)

STUDY = NAME
"""The study whose stories are rated."""

RECORDS = "records"
"""Key of an output's source that maps judge id -> score-record id."""

EXPORT_FILES: dict[str, str] = {"pointwise": "pointwise_ratings.jsonl", "pairwise": "pairwise_verdicts.jsonl",
                                "cases": "pair_cases.jsonl"}
"""What an export writes: the files `human-validation` reads with --pointwise, --pairwise and --cases."""


def response_record_ids(records: Iterable[dict[str, Any]], story_id: str, seed: int) -> dict[str, str]:
    """judge id -> record id of one final story, from its cell's score records (every seed's; the seed is only
    in the id ScoreRecord.make_id gives it)."""
    return {record["judge"]: record["record_id"] for record in records
            if record.get("story_id") == story_id and record.get("record_id") == ScoreRecord.make_id(
                str(record.get("model")), str(record.get("condition")), story_id, seed, str(record.get("judge")))}


def story_pairwise_rating(item_id: str, rater: str, shown_order: Sequence[int], verdicts: dict[str, str],
                          seconds: float | None = None) -> Rating:
    """A pairwise story rating from its two verdicts as the rater saw them (levels of human_records.LEVELS):
    stored per question in canonical order (+2 = FULL clearly better), creative quality as its preference."""
    canonical = {question: canonical_preference(LEVEL_SCORE[verdicts[question]], shown_order)
                 for question in PAIRWISE_DIMENSIONS}
    return Rating(item_id=item_id, rater=rater, kind="pairwise", shown_order=tuple(shown_order), scores=canonical,
                  preference=canonical["creative_quality"], label=verdicts["creative_quality"].replace(" ", "_"),
                  seconds=seconds)


def seen_verdicts(rating: Rating) -> tuple[str, dict[str, str]]:
    """The presentation order of a pairwise story rating and its verdicts as the rater saw them."""
    return shown_order(rating.shown_order), {question: SCORE_LEVEL[canonical_preference(int(rating.scores[question]), rating.shown_order)]
                   for question in PAIRWISE_DIMENSIONS}


@dataclass
class StoryExport:
    """One sweep's story ratings in the human-validation formats, for one judge's score records."""

    ratings: list[PointwiseRating] = field(default_factory=list)
    """Pointwise ratings, one per (response, rater)."""
    verdicts: list[PairwiseVerdict] = field(default_factory=list)
    """Pairwise verdicts, one per (case, rater), in the order the rater saw."""
    cases: list[PairCase] = field(default_factory=list)
    """The rated pairwise cases (case id = item id), FULL as record_a."""
    left_out: int = 0
    """Ratings of a response with no score record from the judge (its verdicts failed), not exported."""


def sweep_story_items(store: AnnotationStore, sweep: str, kind: str | None = None) -> dict[str, AnnotationItem]:
    """item id -> story item of one sweep."""
    return {item.item_id: item for item in store.items(kind, STUDY) if item.sweep == sweep}


def story_judges(store: AnnotationStore, sweep: str) -> list[str]:
    """Judges with a score record of some stored story of the sweep."""
    return sorted({judge for item in sweep_story_items(store, sweep).values() for source in item.sources
                   for judge in source.get(RECORDS, {})})


def story_exports(store: AnnotationStore, sweep: str, judge: str) -> StoryExport:
    """Every rater's story ratings of the sweep, named by the judge's score-record ids."""
    export = StoryExport()
    items = sweep_story_items(store, sweep)
    cases: dict[str, PairCase] = {}
    for rating in store.ratings():
        item = items.get(rating.item_id)
        if item is None:
            continue
        record_ids = [source.get(RECORDS, {}).get(judge) for source in item.sources]
        if not all(record_ids):
            export.left_out += 1
        elif rating.kind == "pointwise":
            export.ratings.append(PointwiseRating(record_ids[0], rating.rater,
                                                  {key: rating.scores.get(key) for key in QUALITY_FIELDS}))
        else:
            order, verdicts = seen_verdicts(rating)
            export.verdicts.append(PairwiseVerdict(item.item_id, rating.rater, order, verdicts))
            cases[item.item_id] = PairCase(item.item_id, record_ids[0], record_ids[1])
    export.cases = list(cases.values())
    return export


def save_story_exports(export: StoryExport, out_dir: str | Path) -> dict[str, Path]:
    """Write the export's files (EXPORT_FILES) into out_dir, each kind only when it has rows (a file left from an
    earlier export is removed then, so the folder never mixes two exports); returns the written ones by kind."""
    out_dir = Path(out_dir)
    written = {}
    for kind, rows, save in (("pointwise", export.ratings, save_pointwise_ratings),
                             ("pairwise", export.verdicts, save_pairwise_verdicts), ("cases", export.cases, save_pair_cases)):
        path = out_dir / EXPORT_FILES[kind]
        if rows:
            written[kind] = save(rows, path)
        else:
            path.unlink(missing_ok=True)
    return written
