"""Loading and validating infilling instance files: every bad row reported as file:line."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from narrative_eval.data import DataErrors, count_blanks, load_instances, save_instances
from narrative_eval.data.files import file_sha256
from narrative_eval.data.instances import COLUMNS
from narrative_eval.records import InfillingInstance

GOOD = {
    "dataset": "story",
    "ref_id": "s-1",
    "source_text": "Ann lost her keys. <eos> She searched the house. <eos> They were in her coat.",
    "problem": "Ann lost her keys. ______ They were in her coat.",
    "gold_answer": "She searched the house.",
    "unit": "sentence(s)",
    "n": "1",
    "unit_idx": "1",
}


def write_csv(path: Path, rows: list[dict[str, str]], header: list[str] | None = None) -> Path:
    header = header or list(COLUMNS)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def located(exc: DataErrors) -> list[tuple[int | None, str]]:
    return [(error.line, error.message) for error in exc.errors]


def test_good_csv_loads(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "good.csv", [GOOD])
    [instance] = load_instances(path)
    assert instance.n == 1 and instance.unit_idx == 1 and instance.ref_id == "s-1"
    assert instance.instance_id == "story/s-1/1/1"


def test_missing_column_reported_at_header(tmp_path: Path) -> None:
    header = [c for c in COLUMNS if c != "gold_answer"]
    path = write_csv(tmp_path / "missing.csv", [GOOD], header)
    with pytest.raises(DataErrors) as info:
        load_instances(path)
    assert str(info.value.errors[0]).startswith(f"{path}:1: missing column(s): gold_answer (the header has: ")
    assert len(info.value.errors) == 1


def test_every_bad_csv_row_is_listed_with_its_line(tmp_path: Path) -> None:
    rows = [
        GOOD,  # line 2
        {**GOOD, "problem": "Ann lost her keys. They were in her coat."},  # line 3: no blank
        {**GOOD, "problem": "______ Ann lost her keys. ______"},  # line 4: two blanks
        {**GOOD, "n": "4"},  # line 5
        {**GOOD, "gold_answer": "   "},  # line 6
        # lines 7-9: a valid record whose quoted source_text holds two newlines
        {**GOOD, "source_text": "Ann lost her keys.\nShe searched the house.\nThey were in her coat."},
        {**GOOD, "unit_idx": "-1"},  # line 10: starts after the multi-line record
        {**GOOD, "problem": ""},  # line 11
        {**GOOD, "n": "two", "unit_idx": "1.5"},  # line 12: both reported
    ]
    path = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(DataErrors) as info:
        load_instances(path)
    errors = located(info.value)
    assert [line for line, _ in errors] == [3, 4, 5, 6, 10, 11, 12, 12]
    messages = dict(errors[:6])
    assert "no blank" in messages[3]
    assert "2 blanks" in messages[4]
    assert "n must be an integer from 1 to 3" in messages[5] and "'4'" in messages[5]
    assert messages[6] == "empty gold_answer"
    assert "unit_idx must be a non-negative integer" in messages[10]
    assert messages[11] == "empty problem"
    assert str(info.value.errors[0]).startswith(f"{path}:3: ")
    assert "8 invalid row(s)" in str(info.value)


def test_longer_underscore_runs_count_as_one_blank(tmp_path: Path) -> None:
    # The published examples use eight underscores; any run of 3+ is one blank.
    row = {**GOOD, "problem": "Ann lost her keys. ________ They were in her coat."}
    [instance] = load_instances(write_csv(tmp_path / "long_blank.csv", [row]))
    assert instance.problem == row["problem"]  # kept verbatim
    assert count_blanks("a __ b") == 0
    assert count_blanks("a ___ b ______ c") == 2


def test_jsonl_errors_use_physical_lines(tmp_path: Path) -> None:
    good = {**GOOD, "n": 1, "unit_idx": 1}
    lines = [
        json.dumps(good),  # 1
        "",  # 2: blank lines are skipped but still counted
        '{"dataset": "story", "ref_id": ',  # 3: invalid JSON
        json.dumps({**good, "n": 4}),  # 4
        json.dumps({k: v for k, v in good.items() if k != "problem"}),  # 5
        json.dumps({**good, "problem": "no blank here"}),  # 6
        json.dumps(["not", "an", "object"]),  # 7
        json.dumps({**good, "gold_answer": ""}),  # 8
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataErrors) as info:
        load_instances(path)
    errors = located(info.value)
    assert [line for line, _ in errors] == [3, 4, 5, 6, 7, 8]
    assert errors[0][1].startswith("invalid JSON")
    assert "n must be an integer from 1 to 3" in errors[1][1]
    assert errors[2][1] == "missing field(s): problem"
    assert "no blank" in errors[3][1]
    assert errors[4][1] == "expected a JSON object"
    assert errors[5][1] == "empty gold_answer"
    assert str(info.value.errors[0]).startswith(f"{path}:3: invalid JSON")


def tricky_instances() -> list[InfillingInstance]:
    return [
        InfillingInstance(
            dataset="news",
            ref_id="7",
            source_text='He said, "Yes, of course." <eos> Then, at 5 p.m., it rained. <eos> Café owners cheered — loudly.',
            problem='He said, "Yes, of course." ______ Café owners cheered — loudly.',
            gold_answer="Then, at 5 p.m., it rained.",
            n=1,
            unit_idx=1,
        ),
        InfillingInstance(
            dataset="wikipedia",
            ref_id="a,b",
            source_text="Line one.\nLine two, with a newline before it. <eos> Three.",
            problem="______ Three.",
            gold_answer="Line one.\nLine two, with a newline before it.",
            unit="sentence(s)",
            n=2,
            unit_idx=0,
        ),
    ]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    instances = tricky_instances()
    path = save_instances(instances, tmp_path / f"round{suffix}")
    assert load_instances(path) == instances


def test_published_format_with_index_and_extra_columns(tmp_path: Path) -> None:
    # As pandas writes it: an unnamed index column first, numeric ref_id, an extra column.
    path = tmp_path / "published.csv"
    header = ["", "dataset", "ref_id", "source_text", "problem", "gold_answer", "unit", "n", "unit_idx", "split"]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerow(
            [
                "0",
                "rocstories",
                "48213",
                "Erin loved football. <eos> He played after school. <eos> He stopped playing.",
                "Erin loved football. ________ He stopped playing.",
                "He played after school.",
                "sentence(s)",
                "1",
                "1",
                "test",
            ]
        )
        writer.writerow(["1", "wikipedia", "12.0", "A. <eos> B. <eos> C.", "A. B. ______", "C.", "sentence(s)", "1.0", "2", "test"])
    first, second = load_instances(path)
    assert first.ref_id == "48213" and first.dataset == "rocstories"
    assert second.ref_id == "12" and second.n == 1 and second.unit_idx == 2


def test_pandas_written_file_loads(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame([instance.model_dump() for instance in tricky_instances()])
    frame["ref_id"] = [7, 8]  # numeric, as in the published file
    frame["model_output"] = ["x", "y"]
    path = tmp_path / "pandas.csv"
    frame.to_csv(path)  # keeps the unnamed index column
    loaded = load_instances(path)
    assert [instance.ref_id for instance in loaded] == ["7", "8"]
    assert [instance.gold_answer for instance in loaded] == [i.gold_answer for i in tricky_instances()]


@pytest.mark.parametrize(("name", "text", "found"), [
    ("header_only.csv", ",".join(COLUMNS) + "\n\n", "its header and no rows"),
    ("empty.jsonl", "", "no records (one JSON object per line)"),
    ("blank_lines.jsonl", "\n  \n\n", "no records (one JSON object per line)"),
])
def test_a_file_without_instances_is_an_error_naming_it(tmp_path: Path, name: str, text: str, found: str) -> None:
    """A header alone used to load as zero instances, and a sweep on it finished with nothing run."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataErrors) as info:
        load_instances(path)
    assert located(info.value) == [(None, f"no instances: the file has {found}")]
    assert info.value.problems == [f"{path}: no instances: the file has {found}"]


def test_unsupported_suffix_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "instances.txt"
    path.write_text("x", encoding="utf-8")
    with pytest.raises(DataErrors, match="unsupported file type"):
        load_instances(path)


def test_file_sha256_matches_hashlib_and_tracks_changes(tmp_path: Path) -> None:
    path = save_instances(tricky_instances(), tmp_path / "data.jsonl")
    before = file_sha256(path)
    assert before == hashlib.sha256(path.read_bytes()).hexdigest()
    save_instances(tricky_instances()[:1], path)
    assert file_sha256(path) != before
