"""The one writer of report tables: every table lands as CSV (numbers rounded, names as logged), markdown and
LaTeX (columns under the label map's names, as the app shows them)."""

from __future__ import annotations

import re
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


def write_table(table: pd.DataFrame, out_dir: Path, name: str) -> str:
    """name.csv (numbers rounded), name.md and name.tex (NaN as --); returns the markdown."""
    write_csv(table, out_dir / f"{name}.csv")
    markdown = markdown_table(table)
    (out_dir / f"{name}.md").write_text(markdown + "\n", encoding="utf-8")
    (out_dir / f"{name}.tex").write_text(latex_text(table), encoding="utf-8")
    return markdown


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """The table under the label map's names: its columns, and the names in columns of names (a metric column)."""
    shown = table.copy()
    for column in labelled_values():
        if column in shown:
            shown[column] = [label(v) if isinstance(v, str) else v for v in shown[column]]
    return shown.rename(columns=labels([str(c) for c in shown.columns]))


def latex_text(table: pd.DataFrame, float_format: str = "%.3f") -> str:
    """The table as LaTeX under readable names, numbers to `float_format`, NaN as --."""
    return readable(table).to_latex(index=False, float_format=float_format.__mod__, na_rep="--", escape=True)


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
