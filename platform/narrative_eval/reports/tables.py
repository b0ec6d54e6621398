"""The one writer of report tables: every table lands as CSV (numbers rounded, names as logged), markdown and
LaTeX (columns under the label map's names, as the app shows them; judge dimensions as the rubrics that scored them
name them)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from narrative_eval.lazy import lazy_module
from narrative_eval.records import finite_number
from narrative_eval.records.keys import interval_keys, with_interval
from narrative_eval.reports.labels import label, labelled_values, labels

pd = lazy_module("pandas")

FLOAT_DIGITS = 6
"""Decimals kept in the CSV files."""


def markdown_table(table: pd.DataFrame) -> str:
    """The table as markdown, numbers to three decimals."""
    if table.empty:
        return "(no rows)"
    try:
        return table.to_markdown(index=False, floatfmt=".3f")
    except ImportError:  # tabulate missing: a plain pipe table
        header = "| " + " | ".join(map(str, table.columns)) + " |"
        rule = "|" + "|".join("---" for _ in table.columns) + "|"
        body = [
            "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
            for row in table.itertuples(index=False)
        ]
        return "\n".join([header, rule, *body])


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """The table as CSV, numbers rounded to FLOAT_DIGITS."""
    table.round(FLOAT_DIGITS).to_csv(path, index=False)


def write_table(table: pd.DataFrame, out_dir: Path, name: str, rubrics: tuple[str, ...] = ()) -> str:
    """name.csv (numbers rounded), name.md and name.tex (NaN as --; judge dimensions as `rubrics` name them, the
    rubrics that scored them: reports.labels); returns the markdown."""
    write_csv(table, out_dir / f"{name}.csv")
    markdown = markdown_table(table)
    (out_dir / f"{name}.md").write_text(markdown + "\n", encoding="utf-8")
    (out_dir / f"{name}.tex").write_text(latex_text(table, rubrics=rubrics), encoding="utf-8")
    return markdown


MISSING_TABLES = "missing_tables.json"
"""A report folder's list of the tables it could not write, each with why (docs/formats.md): the report is then
incomplete, and the app and the report command say so where those tables would be."""

TABLE_SUFFIXES = (".csv", ".md", ".tex", ".png")
"""The files one table of a report may have."""


def write_missing_tables(out_dir: Path, missing: Mapping[str, str]) -> dict[str, str]:
    """Record the tables (file stem -> why) this report could not write in out_dir/MISSING_TABLES, removing their
    files an earlier report left there (their numbers no longer hold), or remove the record when nothing is missing.
    Returns the missing tables as report entries, one per reason: "<stem>, <stem> not written" -> the quoted reason."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / MISSING_TABLES
    if not missing:
        path.unlink(missing_ok=True)
        return {}
    for name in missing:
        for suffix in TABLE_SUFFIXES:
            (out_dir / f"{name}{suffix}").unlink(missing_ok=True)
    path.write_text(json.dumps([{"table": name, "reason": why} for name, why in missing.items()], indent=2) + "\n",
                    encoding="utf-8")
    by_reason: dict[str, list[str]] = {}
    for name, why in missing.items():
        by_reason.setdefault(why, []).append(name)
    return {f"{', '.join(names)} not written": f"> Not written: {why}" for why, names in by_reason.items()}


def missing_tables(folder: Path) -> dict[str, str]:
    """The tables a report folder lacks, by file stem, with why (empty: a complete report, or no record)."""
    path = folder / MISSING_TABLES
    if not path.is_file():
        return {}
    return {str(entry["table"]): str(entry["reason"]) for entry in json.loads(path.read_text(encoding="utf-8"))}


def readable(table: pd.DataFrame, rubrics: tuple[str, ...] = ()) -> pd.DataFrame:
    """The table under the label map's names (its judge dimensions as `rubrics` name them): its columns, and the
    names in columns of names (a metric column, a dimension column)."""
    shown = table.copy()
    for column in labelled_values():
        if column in shown:
            shown[column] = [label(v, rubrics) if isinstance(v, str) else v for v in shown[column]]
    return shown.rename(columns=labels([str(c) for c in shown.columns], rubrics))


def latex_text(table: pd.DataFrame, float_format: str = "%.3f", rubrics: tuple[str, ...] = ()) -> str:
    """The table as LaTeX under readable names (`readable`), numbers to `float_format`, NaN as --."""
    return readable(table, rubrics).to_latex(index=False, float_format=float_format.__mod__, na_rep="--", escape=True)


def interval_text(mean: object, lo: object, hi: object, digits: int = 3) -> str:
    """`mean [lo, hi]` (`mean` alone without both bounds, `n/a` without a mean; a text mean, e.g. 'mean ± SD',
    is kept as it is)."""
    interval = (f" [{finite_number(lo):.{digits}f}, {finite_number(hi):.{digits}f}]"
                if finite_number(lo) is not None and finite_number(hi) is not None else "")
    if isinstance(mean, str):
        return f"{mean}{interval}"
    return f"{finite_number(mean):.{digits}f}{interval}" if finite_number(mean) is not None else "n/a"


def fold_intervals(table: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Markdown/LaTeX form: each column with `_lo`/`_hi` companions becomes text `mean [lo, hi]` (the app shows
    report tables the same way)."""
    folded = table.copy()
    for name in [c for c in table.columns if all(bound in table for bound in interval_keys(c))]:
        if len(table):
            folded[name] = [interval_text(m, lo, hi, digits)
                            for m, lo, hi in zip(*(table[c] for c in with_interval(name)), strict=True)]
        folded = folded.drop(columns=list(interval_keys(name)))
    return folded


def file_slug(text: str) -> str:
    """A name (a judge id) made safe as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "judge"
