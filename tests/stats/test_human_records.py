"""Human-validation files: pointwise ratings, pairwise verdicts and cases read, checked and written back."""

from __future__ import annotations

import json

import pytest
from narrative_eval.errors import DataErrors
from narrative_eval.studies.incremental.human_records import (
    LEVEL_SCORE,
    EvidenceStatus,
    PairCase,
    PairwiseVerdict,
    PointwiseRating,
    load_pair_cases,
    load_pairwise_evidence,
    load_pairwise_verdicts,
    load_pointwise_ratings,
    save_pair_cases,
    save_pairwise_evidence,
    save_pairwise_verdicts,
    save_pointwise_ratings,
)

SCORES = {"craft": 4, "structure_coherence": 3, "originality": 2, "genre_effectiveness": 5, "characterization": None}


def write_lines(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows), encoding="utf-8")
    return path


def test_pointwise_ratings_round_trip(tmp_path):
    ratings = [PointwiseRating("r1", "ann", dict(SCORES)), PointwiseRating("r1", "bob", {**SCORES, "characterization": 2})]
    path = save_pointwise_ratings(ratings, tmp_path / "ratings.jsonl")
    assert load_pointwise_ratings(path, record_ids={"r1"}) == ratings
    assert json.loads(path.read_text().splitlines()[0]) == {"record_id": "r1", "rater": "ann", **SCORES}


def test_pairwise_verdicts_and_cases_round_trip(tmp_path):
    verdicts = [
        PairwiseVerdict("c1", "judge", "primary", {"constraint_following": "A clearly better", "creative_quality": "Tie"}),
        PairwiseVerdict("c1", "judge", "reversed", {"constraint_following": "B slightly better", "creative_quality": "A slightly better"}),
    ]
    cases = [PairCase("c1", "r1", "r2")]
    assert load_pairwise_verdicts(save_pairwise_verdicts(verdicts, tmp_path / "v.jsonl"), case_ids={"c1"}) == verdicts
    assert load_pair_cases(save_pair_cases(cases, tmp_path / "c.jsonl"), record_ids={"r1", "r2"}) == cases


def test_encoding_and_order_restoration():
    assert [LEVEL_SCORE[level] for level in ("A clearly better", "A slightly better", "Tie", "B slightly better", "B clearly better")] == [2, 1, 0, -1, -2]
    reversed_verdict = PairwiseVerdict("c", "j", "reversed", {"constraint_following": "B slightly better", "creative_quality": "Tie"})
    # Shown reversed, "B slightly better" prefers the primary A: restored +1.
    assert reversed_verdict.score("constraint_following") == -1
    assert reversed_verdict.restored("constraint_following") == 1
    assert reversed_verdict.restored("creative_quality") == 0


def test_every_bad_pointwise_line_is_named(tmp_path):
    path = write_lines(tmp_path / "ratings.jsonl", [
        {"record_id": "r1", "rater": "ann", **SCORES},
        "{not json",
        {"record_id": "r1", "rater": "ann", **SCORES},
        {"record_id": "zz", "rater": "ann", **SCORES},
        {"record_id": "r2", "rater": "ann", **SCORES, "craft": 6},
        {"record_id": "r2", "rater": "", "craft": 3.5},
    ])
    with pytest.raises(DataErrors) as caught:
        load_pointwise_ratings(path, record_ids={"r1", "r2"})
    text = "\n".join(caught.value.problems)
    assert f"{path}:2: invalid JSON" in text
    assert f"{path}:3: duplicate r1 / ann (first at line 1)" in text
    assert f"{path}:4: unknown record_id 'zz'" in text
    assert f"{path}:5: craft 6 outside the 1-5 integer scale" in text
    assert f"{path}:6: missing field(s): structure_coherence" in text
    assert f"{path}:6: rater must be a non-empty string" in text
    assert f"{path}:6: craft 3.5 outside" in text
    assert not any(f"{path}:1:" in p for p in caught.value.problems)


def test_every_bad_verdict_and_case_line_is_named(tmp_path):
    good = {"case_id": "c1", "rater": "h", "order": "primary", "constraint_following": "Tie", "creative_quality": "Tie"}
    path = write_lines(tmp_path / "v.jsonl", [
        good, good, {**good, "order": "sideways"}, {**good, "rater": "j", "creative_quality": "A much better"},
        {**good, "case_id": "c9"},
    ])
    with pytest.raises(DataErrors) as caught:
        load_pairwise_verdicts(path, case_ids={"c1"})
    text = "\n".join(caught.value.problems)
    assert f"{path}:2: duplicate c1 / h / primary (first at line 1)" in text
    assert f"{path}:3: order 'sideways' is not 'primary' or 'reversed'" in text
    assert f"{path}:4: creative_quality 'A much better' is not one of the five levels" in text
    assert f"{path}:5: unknown case_id 'c9'" in text
    cases = write_lines(tmp_path / "c.jsonl", [{"case_id": "c1", "record_a": "r1", "record_b": "r1"},
                                               {"case_id": "c2", "record_a": "r1", "record_b": "nope"}])
    with pytest.raises(DataErrors) as caught:
        load_pair_cases(cases, record_ids={"r1"})
    assert [str(e) for e in caught.value.errors] == [
        f"{cases}:1: record_a and record_b are the same response 'r1'",
        f"{cases}:2: unknown record 'nope' (record_b)",
    ]


def test_pairwise_evidence_round_trip_and_bad_lines(tmp_path):
    evidence = [EvidenceStatus("c1", "j/pairwise_evidence", "primary", "A", "r1", "k1", "satisfied", "the lamp"),
                EvidenceStatus("c1", "j/pairwise_evidence", "reversed", "B", "r1", "k1", "partial", "")]
    path = save_pairwise_evidence(evidence, tmp_path / "e.jsonl")
    assert load_pairwise_evidence(path, case_ids={"c1"}) == evidence
    assert json.loads(path.read_text().splitlines()[0]) == {
        "case_id": "c1", "rater": "j/pairwise_evidence", "order": "primary", "shown_as": "A", "record_id": "r1",
        "constraint_id": "k1", "status": "satisfied", "quote": "the lamp"}
    good = json.loads(path.read_text().splitlines()[0])
    bad = write_lines(tmp_path / "bad.jsonl", [good, good, {**good, "shown_as": "C", "order": "reversed"},
                                               {**good, "constraint_id": "k2", "quote": None},
                                               {**good, "case_id": "c9"}])
    with pytest.raises(DataErrors) as caught:
        load_pairwise_evidence(bad, case_ids={"c1"})
    assert [str(e) for e in caught.value.errors] == [
        f"{bad}:2: duplicate c1 / j/pairwise_evidence / primary / A / k1 (first at line 1)",
        f"{bad}:3: shown_as 'C' is not 'A' or 'B'",
        f"{bad}:4: quote must be a string ('' for none)",
        f"{bad}:5: unknown case_id 'c9' (case_id)",
    ]
