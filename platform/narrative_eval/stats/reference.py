"""Published reference rows (data/reference/) beside a sweep's main table.

A reference file is long CSV, one number per line, as transcribed from a study's text:
table, row, model, setting, judge, metric, value, source (format: docs/formats.md).
"""

from __future__ import annotations

from pathlib import Path

from narrative_eval.errors import UserError
from narrative_eval.lazy import lazy_module

pd = lazy_module("pandas")

REFERENCE_DIR = Path(__file__).resolve().parents[3] / "data" / "reference"
"""Where named reference files live: `<name>_infilling.csv`."""

REFERENCE_COLUMNS = ("table", "row", "model", "setting", "judge", "metric", "value", "source")
"""Columns of a reference file."""

SUBSET_TABLES = {13: "10% subset of the study's benchmark", 14: "10% subset of the study's benchmark"}
"""Published tables computed on less than the whole benchmark (their captions say so)."""


def reference_path(name: str) -> Path:
    """A reference name (`published` -> data/reference/published_infilling.csv) or a CSV path."""
    path = Path(name)
    return path if path.suffix == ".csv" else REFERENCE_DIR / f"{name}_infilling.csv"


def load_reference(name: str) -> pd.DataFrame:
    """The reference file's rows (long form); a missing file or column is a UserError."""
    path = reference_path(name)
    if not path.exists():
        known = sorted(p.name.removesuffix("_infilling.csv") for p in REFERENCE_DIR.glob("*_infilling.csv"))
        raise UserError([f"no reference {name!r} ({path}); known: {', '.join(known) or 'none'}"])
    frame = pd.read_csv(path, dtype={"judge": str}, keep_default_na=False, na_values={"value": [""]})
    missing = [c for c in REFERENCE_COLUMNS if c not in frame]
    if missing:
        raise UserError([f"{path}: missing column(s) {', '.join(missing)}"])
    return frame


def reference_wide(reference: pd.DataFrame) -> pd.DataFrame:
    """One row per published table row: source ('published, Table N'), model, setting, judge, note, one column per metric."""
    keys = ["table", "model", "setting", "judge"]
    wide = reference.pivot_table(index=keys, columns="metric", values="value", aggfunc="first").reset_index()
    wide.columns.name = None
    wide.insert(0, "source", wide["table"].map(lambda t: f"published, Table {t}"))
    wide["note"] = wide["table"].map(lambda t: SUBSET_TABLES.get(int(t), "the study's benchmark and judge"))
    return wide.drop(columns="table")


def sweep_rows(main: pd.DataFrame, judges: list[str], sweep: str, note: str) -> pd.DataFrame:
    """The sweep's main table in the reference layout: one row per cell and judge, judge columns unprefixed."""
    judged = []
    for judge in judges or [""]:
        prefix = f"{judge}:"
        mine = [c for c in main.columns if c.startswith(prefix)] if judge else []
        others = [c for c in main.columns if ":" not in c]
        frame = main[others + mine].rename(columns={c: c[len(prefix):] for c in mine})
        judged.append(frame.assign(judge=judge))
    rows = pd.concat(judged, ignore_index=True)
    rows.insert(0, "source", f"sweep {sweep}")
    rows["note"] = note
    return rows


def beside_reference(main: pd.DataFrame, judges: list[str], sweep: str, note: str, reference: pd.DataFrame) -> pd.DataFrame:
    """The sweep's rows, then the published ones, in one table with the sweep's column order first."""
    ours = sweep_rows(main, judges, sweep, note)
    published = reference_wide(reference)
    columns = list(ours.columns) + [c for c in published.columns if c not in ours.columns]
    return pd.concat([ours, published], ignore_index=True)[columns]
