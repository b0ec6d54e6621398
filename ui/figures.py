"""Figures tab: a sweep's report (reports/<sweep>/) as a paper shows it. Its tables come in the study's order
(narrative_eval.reports.catalog: main table first and open, the rest folded), each with its title, a one-line
caption, intervals as `mean [lo, hi]`, labelled columns, a horizontal scroll when wide, and CSV and LaTeX
downloads; the report's figures sit under the main table. An incomplete report (tables it could not write) is
marked as such, each missing table in its place with why; a judge that failed its control checks is warned about
for every sweep, from the report's judge_checks.csv and from the sweep's runs in MLflow."""

from __future__ import annotations

import hashlib
import html
from pathlib import Path
from urllib.parse import quote

import gradio as gr
import pandas as pd
from markdown_it import MarkdownIt

from narrative_eval.reports.catalog import (FoundTable, latex_table, report_sweep, report_tables, shown_table,
                                           study_of_report)
from narrative_eval.reports.judge_checks import failing_in_report, judge_warning, report_notes, sweep_failing_judges
from narrative_eval.reports.tables import MISSING_TABLES, file_slug
from ui.common import AppSettings, counted, html_table, texts
from ui.downloads import download_file

_MARKDOWN = MarkdownIt("commonmark", {"html": False})

LONG_TEXT = 60
"""Cells longer than this (passages, fills) wrap in a wide column instead of stretching the table."""


def report_sweeps(app: AppSettings) -> list[str]:
    """Sweeps with a report folder, most recently written first."""
    if not app.reports_dir.exists():
        return []
    folders = [p for p in app.reports_dir.iterdir() if p.is_dir()]
    return [p.name for p in sorted(folders, key=lambda p: -p.stat().st_mtime)]


def report_folder(app: AppSettings, sweep: str | None) -> tuple[Path | None, str]:
    """The sweep's report folder, or None and what to say instead (no sweep, an unknown one, an empty one)."""
    if not sweep:
        return None, texts()["no_sweeps"]
    folder = (app.reports_dir / sweep).resolve()
    # The sweep name comes from the page: never leave the reports folder.
    if app.reports_dir.resolve() not in folder.parents or not folder.is_dir():
        return None, f"No report folder `{sweep}/` under `{app.reports_dir}`: pick a sweep from the list."
    if not any(folder.glob("*.csv")) and not any(folder.glob("*.png")):
        return None, f"No tables or figures in `{folder.name}/` yet: its sweep writes them when it ends."
    return folder, ""


def figure_files(folder: Path) -> list[tuple[str, str]]:
    """(path, caption) of every figure of the report."""
    return [(str(p), p.stem.replace("_", " ")) for p in sorted(folder.glob("*.png"))]


def table_html(shown: pd.DataFrame) -> str:
    """The table as HTML inside a horizontally scrolling box: numbers on one line, long texts wrapped."""
    def cell(_: str, value: object) -> str:
        text = "" if value is None else str(value)
        kind = " class='long'" if len(text) > LONG_TEXT else ""
        return f"<td{kind}>{html.escape(text)}</td>"

    return html_table(shown, "report-table", "report-table-scroll", cell)


def latex_file(table: FoundTable, shown: pd.DataFrame) -> str:
    """The shown table as a LaTeX file to download (labelled columns, intervals folded, its title as caption).
    Written once per version of the table's CSV: the tab is drawn again on every page load and sweep change, and
    a finished report's tables do not change."""
    stat = table.path.stat()
    version = hashlib.sha256(f"{table.path}|{stat.st_mtime_ns}|{stat.st_size}|{table.title}".encode()).hexdigest()[:16]
    return str(download_file(f"{file_slug(table.name)}.tex", version, lambda: latex_table(shown, table.title)))


def heading(table: FoundTable) -> str:
    return f"{table.title} ({table.source})" if table.source else table.title


def failing_judges_of(folder: Path) -> dict[str, list[str]]:
    """Judge -> the control checks it failed on the report's sweep: those its judge_checks.csv lists, and those the
    `judge_check/<judge>` tags of the sweep's parent run name (as the other tabs read them), so a report cut short
    before its checks' table still warns."""
    failed = {judge: list(checks) for judge, checks in failing_in_report(folder).items()}
    study = study_of_report(folder)
    try:
        tagged = sweep_failing_judges(study.experiment, report_sweep(folder)) if study is not None else {}
    except Exception:  # an unreachable store: the report's own table still speaks
        tagged = {}
    for judge, checks in tagged.items():
        failed[judge] = list(dict.fromkeys([*failed.get(judge, []), *checks]))
    return failed


def report_marks(folder: Path, tables: list[FoundTable]) -> tuple[str, str]:
    """(the incomplete-report mark, the judge warning) of a report, each empty when it has none."""
    missing = [table for table in tables if table.missing]
    incomplete = (f"**⚠ Incomplete report: {len(missing)} of its {len(tables)} tables were not written** "
                  f"({', '.join(table.title for table in missing)}); why is said in each one's place "
                  f"(`{MISSING_TABLES}`)." if missing else "")
    noted = failing_in_report(folder)  # the judges the report's own tables carry a note about
    warnings = [f"**{judge_warning(judge, checks)}**; "
                + ("its tables carry the note." if judge in noted else "from the sweep's runs in MLflow (this report "
                   "has no control-checks table to note its tables from).")
                for judge, checks in failing_judges_of(folder).items()]
    return incomplete, " ".join(warnings)


def markdown_html(text: str) -> str:
    """A report's caption or note (Markdown: bold, code) as HTML."""
    return _MARKDOWN.renderInline(text)


def file_url(path: Path | str) -> str:
    """The app's address of a file it may serve (ui.app.allowed_paths: the reports, the downloads folder)."""
    return f"/gradio_api/file={quote(str(Path(path).resolve()))}"


def _table_body(table: FoundTable) -> str:
    """A written table's caption, the report's notes on it, the table and its CSV and LaTeX downloads."""
    try:
        shown = shown_table(table)
    except (OSError, ValueError, pd.errors.ParserError) as error:
        return f"<p>{html.escape(table.path.name)} could not be read ({html.escape(str(error))}).</p>"
    caption = f"<p class='figures-caption'>{markdown_html(table.caption)}</p>" if table.caption else ""
    notes = report_notes(table.path.with_suffix(".md"))  # the report's own notes (a failing judge's)
    noted = "".join(f"<p class='figures-note judge-check-failed'><strong>{markdown_html(note)}</strong></p>"
                    for note in notes)
    downloads = (f"<div class='figures-downloads'><a class='figures-csv' href='{file_url(table.path)}' download>"
                 f"CSV ({html.escape(table.path.name)})</a><a class='figures-tex' "
                 f"href='{file_url(latex_file(table, shown))}' download>LaTeX</a></div>")
    return caption + noted + f"<div class='figures-table-body'>{table_html(shown)}</div>" + downloads


def _table_block(table: FoundTable, index: int) -> str:
    """One table, folded under its heading (open for the main table); a table the report could not write says why
    in its place."""
    classes = "figures-table" + (" figures-missing" if table.missing else "")
    title = heading(table) + (" (not written)" if table.missing else "")
    if table.missing:
        body = (f"<p class='figures-caption'>{markdown_html(table.caption)}</p>" if table.caption else "") + (
            f"<p class='figures-note figures-missing-reason'><strong>Not written:</strong> "
            f"{markdown_html(table.missing)}</p>")
    else:
        body = _table_body(table)
    return (f"<details class='{classes}' id='figures-table-{index}'{' open' if index == 0 else ''}>"
            f"<summary>{html.escape(title)}</summary>{body}</details>")


def _gallery(images: list[tuple[str, str]]) -> str:
    figures = "".join(f"<figure><img src='{file_url(path)}' alt='{html.escape(caption)}'>"
                      f"<figcaption>{html.escape(caption)}</figcaption></figure>" for path, caption in images)
    return f"<div id='figures-gallery'>{figures}</div>"


def report_view(app: AppSettings, sweep: str | None) -> tuple[str, str, str, str]:
    """(status, incomplete-report mark, judge warning, tables and figures) of the sweep's report: everything the tab
    shows of it, made at once so that a switch replaces all of it."""
    folder, message = report_folder(app, sweep)
    if folder is None:
        return message, "", "", ""
    tables = report_tables(folder)
    images = figure_files(folder)
    written = sum(not table.missing for table in tables)
    status = (f"{counted(written, 'table')} and {counted(len(images), 'figure')} in `{folder.name}/`; the main table "
              "first, the others folded: open one to read it.")
    incomplete, warning = report_marks(folder, tables)
    blocks = []
    for index, table in enumerate(tables):
        blocks.append(_table_block(table, index))
        if index == 0 and images:
            blocks.append(f"<details id='figures-figures' open><summary>Figures</summary>{_gallery(images)}</details>")
    if not tables and images:
        blocks.append(_gallery(images))
    return status, incomplete, warning, "".join(blocks)


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["figures"])
    with gr.Row():
        sweep = gr.Dropdown([], label="Sweep", elem_id="figures-sweep", allow_custom_value=True)
        refresh = gr.Button("Refresh", scale=0, elem_id="figures-refresh")
    status = gr.Markdown(elem_id="figures-status")
    incomplete = gr.Markdown(elem_id="figures-incomplete", elem_classes=["judge-check-failed"])
    warning = gr.Markdown(elem_id="figures-judge-warning", elem_classes=["judge-check-failed"])
    report = gr.HTML(elem_id="figures-report")

    def on_refresh(current):
        names = report_sweeps(app)
        return gr.Dropdown(choices=names, value=current if current in names else (names[0] if names else None))

    def show(sweep_name: str | None):
        return report_view(app, sweep_name)

    # One event draws the whole view from the sweep's name: its four parts always come from one report, however
    # fast the sweep is switched (the last pick is drawn last). Refresh lists the report folders again and redraws.
    one_view = {"concurrency_limit": 1, "concurrency_id": "figures-view", "trigger_mode": "always_last"}
    sweep.change(show, [sweep], [status, incomplete, warning, report], **one_view)
    refresh.click(on_refresh, [sweep], [sweep], **one_view).then(show, [sweep], [status, incomplete, warning, report],
                                                                 **one_view)
    demo.load(on_refresh, [sweep], [sweep]).then(show, [sweep], [status, incomplete, warning, report], **one_view)
    return {"sweep": sweep}
