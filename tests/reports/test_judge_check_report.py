"""A failing judge's tables get a note, in the report's tables and in their .md files, and the index names them;
which tables are a judge's is read from their titles, column headers and metric names."""

from __future__ import annotations

import pandas as pd

from narrative_eval.reports.judge_card import JUDGE_CARD_TITLE
from narrative_eval.reports.judge_checks import JUDGE_CHECKS_TITLE, judge_note, names_judge, with_judge_checks
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_checks import COLUMNS, CheckRow


def row(judge: str, check: str, passed: bool) -> CheckRow:
    return CheckRow(judge, "infilling_narrative", check, "discrimination", 10, 0, 1.0 if passed else 0.4, 0.7, 1.0,
                    0.8, passed, 2.0, 1.5, 2.5, "" if passed else "below 0.8")


def test_a_table_is_a_judges_when_it_names_it_whole():
    header = "| model | setting | smollm2-judge:qavg |\n|---|---|---|\n| smollm2 | L2 | 3.1 |"
    assert names_judge("Main results", header, "smollm2-judge")
    assert not names_judge("Main results", header, "smollm2")  # a model of that name, in a row: not a judge's column
    assert names_judge("QAvg per model x prompt setting [smollm2]", "| model |", "smollm2")
    assert names_judge("Paired differences", "| model | metric |\n|---|---|\n| m | judge/smollm2/qavg |", "smollm2")
    assert names_judge("Letter groups", "| metric | model |\n|---|---|\n| smollm2:qavg | gemma3 |", "smollm2")
    assert not names_judge("AtAvg per model x prompt setting", "| model | L2 |\n|---|---|\n| smollm2 | 0.2 |", "smollm2")


def test_notes_go_under_the_failing_judges_tables_and_the_index_names_them(tmp_path):
    frame = pd.DataFrame({"model": ["m"], "good:qavg": [4.0], "bad:qavg": [4.5]})
    tables = {"Main results": write_table(frame, tmp_path, "main"),
              "AtAvg": write_table(frame[["model"]], tmp_path, "at_avg"),
              "High-quality fills [bad]": write_table(frame, tmp_path, "high_quality_bad")}
    rows = [row("good", "mismatched_fill", True), row("bad", "mismatched_fill", False), row("bad", "degenerate_fill", True)]
    marked = with_judge_checks(tables, rows, tmp_path)
    note = judge_note("bad", ["mismatched_fill"])
    assert marked["Main results"].endswith(note) and marked["High-quality fills [bad]"].endswith(note)
    assert marked["AtAvg"] == tables["AtAvg"] and "`good`" not in marked["Main results"]
    assert (tmp_path / "main.md").read_text().strip().endswith(note)
    assert not (tmp_path / "at_avg.md").read_text().strip().endswith(note)
    # The checks, then every judge's report card (reports.judge_card), end the index.
    assert list(marked)[-2:] == [JUDGE_CHECKS_TITLE, JUDGE_CARD_TITLE]
    assert "do not use its scores: it failed mismatched_fill" in marked[JUDGE_CARD_TITLE]
    assert "- `bad` failed mismatched_fill; its tables (a note under each): Main results; High-quality fills [bad]" \
        in marked[JUDGE_CHECKS_TITLE]
    table = pd.read_csv(tmp_path / "judge_checks.csv")
    assert tuple(table.columns) == COLUMNS and list(table["pass"]) == [True, False, True]
    # Without rows (checks off, or a sweep run before them) nothing changes and nothing is written.
    assert with_judge_checks(tables, [], tmp_path / "none") == tables and not (tmp_path / "none").exists()
