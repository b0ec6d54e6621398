"""The one writer of report tables: every table lands as CSV (numbers rounded), markdown and LaTeX."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

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
    (out_dir / f"{name}.tex").write_text(
        table.to_latex(index=False, float_format="%.3f".__mod__, na_rep="--", escape=True), encoding="utf-8")
    return markdown


def file_slug(text: str) -> str:
    """A name (a judge id) made safe as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "judge"
