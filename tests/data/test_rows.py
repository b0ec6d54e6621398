"""The generic item loader: the shipped passage files read as rows, a missing field as file:line errors, and
`--limit`'s spread over a stratum."""

from pathlib import Path

import pytest

from narrative_eval.data.rows import load_rows, spread_limit
from narrative_eval.errors import DataErrors

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_passage_files_are_rows_of_any_study():
    rows = load_rows(REPO / "data/infilling/passages/news.jsonl", ("dataset", "ref_id", "text"))
    assert len(rows) > 1 and {row["dataset"] for row in rows} == {"news"}
    assert rows[0].line == 1 and rows[0]["text"].strip()


def test_a_row_without_a_field_is_one_located_error_each(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text('{"ref_id": "a", "text": "One."}\n\n{"ref_id": "b"}\n{"ref_id": "c", "text": "Two."}\n',
                    encoding="utf-8")
    with pytest.raises(DataErrors) as caught:
        load_rows(path, ("ref_id", "text"))
    assert caught.value.lines() == [f"error: {path}:3: missing field(s): text (the row has: ref_id)"]
    assert caught.value.exit_status == 2


def test_a_csv_row_is_located_by_its_line(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('ref_id,text\na,"One\nspanning two lines."\nb,\n', encoding="utf-8")
    with pytest.raises(DataErrors) as caught:
        load_rows(path, ("ref_id", "text"))
    assert [str(e) for e in caught.value.errors] == [f"{path}:4: missing field(s): text (the row has: ref_id, text)"]


def test_the_limit_spreads_over_the_stratum_first_and_keeps_file_order():
    items = [("news", 1), ("news", 2), ("story", 3), ("story", 4), ("visual", 5)]
    assert spread_limit(items, 3, lambda item: item[0]) == [("news", 1), ("story", 3), ("visual", 5)]
    assert spread_limit(items, 2) == items[:2]
