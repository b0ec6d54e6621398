"""The judge control checks in a sweep's report: judge_checks.csv (and .md, .tex), read back from the sweep's
parent run, a note under every table whose scores come from a judge that failed a check, and an entry of the
report's index (its tables: the terminal summary, tables.json, the parent run's report/) naming those tables."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_prefix
from narrative_eval.reports.judge_card import JUDGE_CARD_TITLE, write_judge_card
from narrative_eval.reports.labels import label
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_checks import (
    ROWS_ARTIFACT,
    CheckRow,
    failed_checks_warning,
    failed_in_tags,
    failing_judges,
    judge_checks_table,
    rows_from_records,
)

pd = lazy_module("pandas")

JUDGE_CHECKS_NAME = "judge_checks"
"""The file stem of the table (columns: stats.judge_checks.COLUMNS, docs/formats.md)."""

JUDGE_CHECKS_TITLE = "Judge control checks"
"""The table's title in a sweep's summary."""


def write_judge_checks(rows: Sequence[CheckRow], out_dir: str | Path) -> str:
    """Every judge's check rows as judge_checks.csv, .md and .tex in out_dir; returns the markdown."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_table(judge_checks_table(rows), out_dir, JUDGE_CHECKS_NAME)


def failed_checks(rows: Sequence[CheckRow]) -> list[str]:
    """One line per failed check, for a sweep to print: 'judge rubric/check: statistic value (note)'."""
    return [f"{row.judge} {row.rubric}/{row.check}: {row.statistic} {row.value:.3f} ({row.note})"
            for row in rows if not row.passed]


def logged_payload(experiment: str, sweep: str, artifact: str, data_sha256: str | None = None) -> dict | None:
    """A JSON record `{data_sha256, ...}` the sweep's last run logged on its parent run as `artifact` (None when it has
    none, or when it was made on other data than `data_sha256`)."""
    parent = tracking.find_sweep_run(experiment, sweep)
    folder = artifact.rsplit("/", 1)[0]
    if parent is None or artifact not in {a.path for a in tracking.client().list_artifacts(parent, folder)}:
        return None
    payload = tracking.load_json_artifact(parent, artifact)
    if data_sha256 is not None and payload["data_sha256"] != data_sha256:
        return None
    return payload


def logged_rows(experiment: str, sweep: str, data_sha256: str | None = None) -> list[CheckRow]:
    """The check rows the sweep's last run logged on its parent run ([] when it has none, or when they were made on
    other data than `data_sha256`)."""
    payload = logged_payload(experiment, sweep, ROWS_ARTIFACT, data_sha256)
    return rows_from_records(payload["rows"]) if payload is not None else []


def names_judge(title: str, markdown: str, judge: str) -> bool:
    """Whether a report table shows `judge`'s scores: it names the judge in its title or column headers (as a whole
    name: `smollm2` is not `smollm2-judge`), or lists one of its metrics in its rows (`judge/<id>/...` or
    `<id>:<dimension>`, as the paired comparisons do); a model that has the judge's name is not its scores."""
    whole = re.compile(rf"(?<![\w.-]){re.escape(judge)}(?![\w.-])")
    header = markdown.split("\n", 1)[0]
    metric = re.compile(rf"(?<![\w.-]){re.escape(judge)}:\w|{re.escape(judge_prefix(judge))}")
    return bool(whole.search(title) or whole.search(header) or metric.search(markdown))


def tables_naming(tables: Mapping[str, str], judges: Sequence[str]) -> dict[str, list[str]]:
    """Title -> the judges each table names (names_judge): whose scores its columns or rows are."""
    return {title: [judge for judge in judges if names_judge(title, markdown, judge)] for title, markdown in tables.items()}


def judge_warning(judge: str, checks: Sequence[str]) -> str:
    """The one warning about a judge that failed its control checks, wherever its scores appear: under a report's
    tables, and in every tab of the app (Runs once per table, Compare, Conversations, Annotate's agreement, Figures)."""
    return failed_checks_warning(judge, [label(check) for check in checks])


def judge_note(judge: str, checks: Sequence[str]) -> str:
    """The note under a report's table with scores from a judge that failed checks."""
    return f"> {judge_warning(judge, checks)} (see judge_checks.csv)."


def report_notes(markdown_file: Path) -> list[str]:
    """The notes a report wrote under a table (its .md file's quoted lines after the table), as the app shows them."""
    if not markdown_file.is_file():
        return []
    return [line[2:].strip() for line in markdown_file.read_text(encoding="utf-8").splitlines()
            if line.startswith("> ") and line[2:].strip()]


def failing_in_report(folder: Path) -> dict[str, list[str]]:
    """Judge -> its failed checks, read back from a report folder's judge_checks.csv (empty without one)."""
    path = folder / f"{JUDGE_CHECKS_NAME}.csv"
    if not path.is_file():
        return {}
    table = pd.read_csv(path)
    failed: dict[str, list[str]] = {}
    for row in table[~table["pass"].astype(bool)].itertuples(index=False):
        failed.setdefault(str(row.judge), []).append(str(row.check))
    return failed


def sweep_failing_judges(experiment: str, sweep: str) -> dict[str, list[str]]:
    """Judge -> the checks it failed in the sweep's latest control checks, read from its parent run's
    `judge_check/<judge>` tags (empty: no such sweep, no checks, or every judge passed)."""
    parent = tracking.find_sweep_run(experiment, sweep)
    return failed_in_tags(tracking.client().get_run(parent).data.tags) if parent else {}


def _note_file(out_dir: Path, markdown: str, notes: str) -> None:
    """Append the notes to the table's .md file in out_dir (the one holding exactly this markdown), if it has one."""
    for path in out_dir.glob("*.md"):
        if path.read_text(encoding="utf-8").strip() == markdown.strip():
            path.write_text(f"{markdown.strip()}\n\n{notes}\n", encoding="utf-8")
            return


def with_judge_checks(tables: Mapping[str, str], rows: Sequence[CheckRow], out_dir: str | Path,
                      judged: Mapping[str, Sequence[str]] | None = None, index: bool = True,
                      numbers: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, str]:
    """The report's tables with a note under each whose scores come from a judge that failed a check (`judged`:
    title -> the judges of each table, default tables_naming); with `index`, judge_checks.csv/.md/.tex written to
    out_dir and an entry, JUDGE_CHECKS_TITLE, with that table and the failing judges' tables by name, then every
    judge's report card (reports.judge_card, from the rows and `numbers`, what the cells logged about each judge:
    judge_card.cell_numbers) as JUDGE_CARD_TITLE. The tables unchanged when there are neither rows (checks off, or
    a sweep run before them) nor judges."""
    if not rows:
        if index and numbers:
            return {**tables, JUDGE_CARD_TITLE: write_judge_card(rows, numbers, out_dir)}
        return dict(tables)
    out_dir = Path(out_dir)
    failing = failing_judges(rows)
    judged = judged if judged is not None else tables_naming(tables, list(dict.fromkeys(r.judge for r in rows)))
    marked: dict[str, str] = {}
    flagged: dict[str, list[str]] = {}
    for title, markdown in tables.items():
        bad = [judge for judge in judged.get(title, ()) if judge in failing]
        if bad:
            notes = "\n>\n".join(judge_note(judge, failing[judge]) for judge in bad)
            _note_file(out_dir, markdown, notes)
            markdown = f"{markdown}\n\n{notes}"
            for judge in bad:
                flagged.setdefault(judge, []).append(title)
        marked[title] = markdown
    if index:
        summary = [f"- `{judge}` failed {', '.join(checks)}; its tables (a note under each): "
                   f"{'; '.join(flagged.get(judge, [])) or 'none'}" for judge, checks in failing.items()]
        verdict = "\n".join(summary) if summary else "Every judge passed every check."
        marked[JUDGE_CHECKS_TITLE] = f"{write_judge_checks(rows, out_dir)}\n\n{verdict}"
        marked[JUDGE_CARD_TITLE] = write_judge_card(rows, numbers or {}, out_dir)
    return marked


__all__ = [
    "JUDGE_CHECKS_NAME",
    "JUDGE_CHECKS_TITLE",
    "failed_checks",
    "failing_in_report",
    "judge_note",
    "judge_warning",
    "report_notes",
    "sweep_failing_judges",
    "logged_payload",
    "logged_rows",
    "names_judge",
    "tables_naming",
    "with_judge_checks",
    "write_judge_checks",
]
