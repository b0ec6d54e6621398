"""A report folder's tables as a paper shows them: the study's order and titles, intervals folded, labelled
columns, LaTeX; and the studies' presentation files themselves."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from narrative_eval.reports.catalog import (latex_table, record_report_source, report_source, report_sweep, report_tables,
                                           shown_table, study_of_report)
from narrative_eval.study import Presentation, all_studies, load_presentation


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "report"
    folder.mkdir()
    pd.DataFrame({"model": ["m1", "m2"], "setting": ["L0", "L0"], "at_avg": [0.12, 0.2], "at_avg_lo": [0.1, 0.15],
                  "at_avg_hi": [0.14, 0.25], "j:high_pct": [25.0, 50.0]}).to_csv(folder / "main.csv", index=False)
    pd.DataFrame({"model": ["m1"], "a": ["L0"], "b": ["L2"], "metric": ["j:qavg"], "n": [12], "delta": [0.05],
                  "lo": [0.01], "hi": [0.09]}).to_csv(folder / "paired_settings.csv", index=False)
    for name in ("qavg_j", "at_avg", "cost", "zz_extra"):
        pd.DataFrame({"model": ["m1"], "L0": [3.0]}).to_csv(folder / f"{name}.csv", index=False)
    return folder


def test_tables_come_in_the_studys_order_with_titles_and_captions(tmp_path):
    folder = _folder(tmp_path)
    assert study_of_report(folder).name == "infilling"
    tables = report_tables(folder)
    assert [t.name for t in tables] == ["main", "at_avg", "qavg_j", "paired_settings", "cost", "zz_extra"]
    main, qavg = tables[0], tables[2]
    assert main.title == "Main results per model and prompt setting" and main.caption and main.source
    assert qavg.title == "QAvg per model and prompt setting (j)"  # the judge's id filled in
    assert tables[-1].title == "Zz extra" and tables[-1].caption == ""  # a table no presentation describes


def test_a_shown_table_folds_intervals_and_labels_columns_and_names(tmp_path):
    tables = {t.name: t for t in report_tables(_folder(tmp_path))}
    main = shown_table(tables["main"])
    assert list(main.columns) == ["Model", "Setting", "AtAvg", "j High%"]
    assert main.loc[0, "AtAvg"] == "0.120 [0.100, 0.140]"
    paired = shown_table(tables["paired_settings"])
    assert paired.loc[0, "Δ"] == "0.050 [0.010, 0.090]" and "Low" not in paired
    assert paired.loc[0, "Metric"] == "j QAvg" and paired.loc[0, "n"] == "12"
    latex = latex_table(main, tables["main"].title)
    assert "\\caption{Main results per model and prompt setting}" in latex and "j High\\%" in latex


def test_a_folder_no_study_describes_keeps_its_tables(tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    pd.DataFrame({"x": [1]}).to_csv(folder / "numbers.csv", index=False)
    assert study_of_report(folder) is None
    assert [t.title for t in report_tables(folder)] == ["Numbers"]


def test_a_folder_that_names_its_study_and_sweep_is_read_as_theirs(tmp_path):
    """Tables of the same names may be two studies' (a plugin's `main`): the folder's record says whose they are; a
    study not registered here, or no record, falls back to the tables it holds."""
    folder = _folder(tmp_path)
    record_report_source(folder, "continuation", "cont-sweep")
    assert study_of_report(folder).name == "continuation" and report_sweep(folder) == "cont-sweep"
    assert report_source(folder) == {"study": "continuation", "sweep": "cont-sweep"}
    record_report_source(folder, "not-installed-here", None)
    assert study_of_report(folder).name == "infilling" and report_sweep(folder) == "report"


def test_every_study_presents_distinct_tables_main_first():
    for study in all_studies():
        files = [t.file for t in study.presentation().tables]
        assert len(files) == len(set(files)), study.name
        assert all(t.title and t.caption for t in study.presentation().tables), study.name


def test_a_malformed_presentation_names_its_file(tmp_path):
    path = tmp_path / "tables.yaml"
    path.write_text("tables:\n  - file: main\n    titel: typo\n")
    with pytest.raises(ValueError, match="tables.yaml"):
        load_presentation(path)
    assert load_presentation(tmp_path / "missing.yaml") == Presentation()
