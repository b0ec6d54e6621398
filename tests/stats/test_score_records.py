"""Score-record import/export: round trip, and malformed records rejected with file:line."""

from __future__ import annotations

import json

import pytest

from narrative_eval.data.errors import DataErrors
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.score_records import load_score_records, save_score_records


def _record(record_id: str = "r1", **changes) -> dict:
    record = {
        "record_id": record_id,
        "story_id": "fantasy_001",
        "genre": "fantasy",
        "model": "m1",
        "condition": "full",
        "judge": "j1",
        "adherence": [{"constraint_id": "c1", "score": 1}, {"constraint_id": "c2", "score": 0.5}],
        "quality": {"craft": 3, "structure_coherence": 4, "originality": 2, "genre_effectiveness": 3, "characterization": None},
    }
    record.update(changes)
    return record


def _write(path, lines: list) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def test_round_trip_keeps_the_published_format(tmp_path):
    path = tmp_path / "scores.jsonl"
    _write(path, [_record("r1"), _record("r2", condition="sharded")])
    records = load_score_records(path)
    assert [r.condition for r in records] == ["full", "sharded"]
    assert records[0].quality["characterization"] is None
    out = save_score_records(records, tmp_path / "out.jsonl")
    first = json.loads(out.read_text().splitlines()[0])
    assert list(first) == ["record_id", "story_id", "genre", "model", "condition", "judge", "adherence", "quality"]
    # Item scores are written as 0 | 0.5 | 1, as the published files have them.
    assert first["adherence"] == [{"constraint_id": "c1", "score": 1}, {"constraint_id": "c2", "score": 0.5}]
    assert load_score_records(out) == records
    assert all(isinstance(r, ScoreRecord) for r in records)


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "invalid JSON"),
        (json.dumps({k: v for k, v in _record().items() if k != "judge"}), "missing field(s): judge"),
        (json.dumps(_record(adherence=[{"constraint_id": "c1", "score": 0.7}])), "score 0.7 not in {0, 0.5, 1}"),
        (
            json.dumps(_record(quality={**_record()["quality"], "craft": 6})),
            "quality craft 6 outside the 1-5 integer scale",
        ),
        (
            json.dumps(_record(quality={**_record()["quality"], "originality": 0})),
            "quality originality 0 outside the 1-5 integer scale",
        ),
        (
            json.dumps(_record(quality={**_record()["quality"], "structure_coherence": None})),
            "quality structure_coherence may not be null",
        ),
        (json.dumps(_record(condition="streaming")), "unknown condition 'streaming'"),
    ],
)
def test_malformed_record_is_rejected_with_file_and_line(tmp_path, line, message):
    path = tmp_path / "scores.jsonl"
    _write(path, [_record("ok1"), _record("ok2"), line])
    with pytest.raises(DataErrors) as caught:
        load_score_records(path)
    errors = [str(e) for e in caught.value.errors]
    assert len(errors) == 1
    assert errors[0].startswith(f"{path}:3: ")
    assert message in errors[0]


def test_every_bad_line_is_reported_at_once(tmp_path):
    path = tmp_path / "scores.jsonl"
    _write(path, [_record("a"), "", _record("a"), _record("b", condition="x")])
    with pytest.raises(DataErrors) as caught:
        load_score_records(path)
    assert [(e.line, e.message.split(" ")[0]) for e in caught.value.errors] == [(3, "duplicate"), (4, "unknown")]
