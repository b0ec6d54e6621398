"""A report folder's tables as a paper shows them: in the order the study's presentation gives (main table first,
then the platform's own tables, then any other), each with its title and caption, intervals folded into
`mean [lo, hi]`, columns under their labels (judge dimensions as the study's rubrics name them), and as LaTeX; a
table the report could not write (reports.tables.missing_tables) keeps its place with why. The app's Figures tab
reads reports through this."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import interval_keys
from narrative_eval.reports.labels import humanize, is_count, platform_presentation, sweep_rubrics
from narrative_eval.reports.tables import fold_intervals, missing_tables, readable
from narrative_eval.study import STUDIES, ReportTable, Study, all_studies, load_study

pd = lazy_module("pandas")

JUDGE_SLOT = "{judge}"
"""Where a table's file stem and title name a judge id."""


@dataclass(frozen=True)
class FoundTable:
    """One table of a report folder, with what the papers say about it."""

    path: Path
    """Its CSV file."""
    title: str
    """Its title (a judge's id filled in)."""
    caption: str
    """One line on what it shows (empty for a table no presentation describes)."""
    source: str = ""
    """Where the papers show it ('Table 3')."""
    interval: str | None = None
    """The column its plain `lo`/`hi` columns bound."""
    missing: str = ""
    """Why the report could not write it (empty: it did; its file then exists)."""
    rubrics: tuple[str, ...] = ()
    """The rubrics its judge dimensions read under (its study's: reports.labels.sweep_rubrics)."""

    @property
    def name(self) -> str:
        """The file stem (`main`, `qavg_smollm2-judge`)."""
        return self.path.stem


def _pattern(spec: ReportTable) -> re.Pattern[str]:
    return re.compile("^" + re.escape(spec.file).replace(re.escape(JUDGE_SLOT), "(?P<judge>.+)") + "$")


def _matches(spec: ReportTable, stems: list[str]) -> list[tuple[str, str]]:
    """(stem, judge id or '') of every stem the spec's file pattern matches, in name order."""
    pattern = _pattern(spec)
    return [(stem, found.groupdict().get("judge") or "") for stem in stems if (found := pattern.match(stem))]


REPORT_SOURCE = "report_source.json"
"""A report folder's record of the study and sweep it reports (docs/formats.md): two studies may write tables of the
same names, so a folder is not read by its tables where it says whose it is."""


def record_report_source(folder: Path, study: str, sweep: str | None) -> None:
    """Write the folder's REPORT_SOURCE: the study (its registered name) and the sweep its tables come from."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / REPORT_SOURCE).write_text(json.dumps({"study": study, "sweep": sweep}, indent=1) + "\n", encoding="utf-8")


def report_source(folder: Path) -> dict[str, str | None]:
    """The folder's REPORT_SOURCE ({"study": ..., "sweep": ...}); empty for a folder written before it existed, or by
    hand."""
    path = folder / REPORT_SOURCE
    if not path.is_file():
        return {}
    found = json.loads(path.read_text(encoding="utf-8"))
    return {key: found.get(key) for key in ("study", "sweep")}


def report_sweep(folder: Path) -> str:
    """The sweep a report folder reports: as its REPORT_SOURCE says, else the folder's name (a sweep's default)."""
    return report_source(folder).get("sweep") or folder.name


def study_of_report(folder: Path) -> Study | None:
    """The study a report folder reports: the one its REPORT_SOURCE names, where that study is registered here; else
    the study whose presentation describes the most of its tables (None: no study describes any)."""
    recorded = report_source(folder).get("study")
    if recorded and recorded in STUDIES:
        return load_study(recorded)
    stems = _stems(folder)
    scores = [(sum(len(_matches(spec, stems)) for spec in study.presentation().tables), study)
              for study in all_studies()]
    best = max(scores, key=lambda pair: pair[0], default=(0, None))
    return best[1] if best[0] > 0 else None


def _stems(folder: Path) -> list[str]:
    """The stems of the folder's tables: those written (CSV files) and those it records as missing."""
    if not folder.is_dir():
        return []
    return sorted({path.stem for path in folder.glob("*.csv")} | set(missing_tables(folder)))


def report_tables(folder: Path, study: Study | None = None) -> list[FoundTable]:
    """The folder's tables (its CSV files) in the papers' order: those the study's presentation lists (main
    first), then the platform's, then any other by name; a missing table (`missing`: why) in its place. `study`
    defaults to the one the folder reads as."""
    study = study if study is not None else study_of_report(folder)
    stems = _stems(folder)
    missing = missing_tables(folder)
    specs = [*(study.presentation().tables if study is not None else []), *platform_presentation().tables]
    rubrics = sweep_rubrics(study)
    found: list[FoundTable] = []
    placed: set[str] = set()
    for spec in specs:
        for stem, judge in _matches(spec, [s for s in stems if s not in placed]):
            placed.add(stem)
            found.append(FoundTable(folder / f"{stem}.csv", spec.title.replace(JUDGE_SLOT, judge),
                                    spec.caption.replace(JUDGE_SLOT, judge), spec.source, spec.interval,
                                    missing.get(stem, ""), rubrics))
    found += [FoundTable(folder / f"{stem}.csv", humanize(stem), "", missing=missing.get(stem, ""), rubrics=rubrics)
              for stem in stems if stem not in placed]
    return found


def shown_table(table: FoundTable, digits: int = 3) -> pd.DataFrame:
    """The table as a paper prints it: intervals as `mean [lo, hi]`, numbers to `digits` decimals (counts as
    integers), names in labelled columns and the columns under their labels (judge dimensions as its rubrics name
    them)."""
    frame = pd.read_csv(table.path)
    if table.interval and {table.interval, "lo", "hi"} <= set(frame.columns):
        frame = frame.rename(columns=dict(zip(("lo", "hi"), interval_keys(table.interval), strict=True)))
    frame = fold_intervals(frame, digits)
    for column in frame.columns:
        if pd.api.types.is_integer_dtype(frame[column]):
            frame[column] = frame[column].astype(str)
        elif pd.api.types.is_float_dtype(frame[column]):
            # A count with a missing value reads back as floats: still a whole number.
            frame[column] = [_number(v, 0 if is_count(column) else digits) for v in frame[column]]
    return readable(frame.fillna(""), table.rubrics)


def _number(value: float, digits: int) -> str:
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def latex_table(shown: pd.DataFrame, title: str) -> str:
    """A shown table as a LaTeX `table` with its title as caption."""
    body = shown.to_latex(index=False, escape=True, na_rep="--")
    caption = title.replace("\\", "\\textbackslash{}").replace("&", "\\&").replace("%", "\\%").replace("_", "\\_")
    return f"\\begin{{table}}[ht]\n\\centering\n\\caption{{{caption}}}\n{body}\\end{{table}}\n"


__all__ = ["REPORT_SOURCE", "FoundTable", "latex_table", "record_report_source", "report_source", "report_sweep",
           "report_tables", "shown_table", "study_of_report"]
