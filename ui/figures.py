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

import gradio as gr
import pandas as pd

from narrative_eval.reports.catalog import FoundTable, latex_table, report_tables, shown_table, study_of_report
from narrative_eval.reports.judge_checks import failing_in_report, judge_warning, report_notes, sweep_failing_judges
from narrative_eval.reports.tables import MISSING_TABLES, file_slug
from ui.common import AppSettings, counted, html_table, texts
from ui.downloads import download_file

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
        tagged = sweep_failing_judges(study.experiment, folder.name) if study is not None else {}
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


def _missing_block(table: FoundTable) -> None:
    """Why the report has no such table, where the table would be."""
    if table.caption:
        gr.Markdown(table.caption, elem_classes=["figures-caption"])
    gr.Markdown(f"**Not written:** {table.missing}", elem_classes=["figures-note", "figures-missing-reason"])


def _table_block(table: FoundTable, index: int) -> None:
    """One table: its caption, the table, and its downloads, in an accordion (open for the main table); a table the
    report could not write says why instead."""
    with gr.Accordion(heading(table) + (" (not written)" if table.missing else ""), open=index == 0,
                      elem_id=f"figures-table-{index}",
                      elem_classes=["figures-table", *(["figures-missing"] if table.missing else [])]):
        if table.missing:
            _missing_block(table)
            return
        try:
            shown = shown_table(table)
        except (OSError, ValueError, pd.errors.ParserError) as error:
            gr.Markdown(f"`{table.path.name}` could not be read ({error}).")
            return
        if table.caption:
            gr.Markdown(table.caption, elem_classes=["figures-caption"])
        notes = report_notes(table.path.with_suffix(".md"))  # the report's own notes (a failing judge's)
        gr.Markdown("\n\n".join(f"**{note}**" for note in notes), visible=bool(notes),
                    elem_classes=["figures-note", "judge-check-failed"])
        gr.HTML(table_html(shown), elem_classes=["figures-table-body"])
        with gr.Row():
            gr.DownloadButton(f"CSV ({table.path.name})", value=str(table.path), size="sm", scale=0,
                              elem_classes=["figures-csv"])
            gr.DownloadButton("LaTeX", value=latex_file(table, shown), size="sm", scale=0,
                              elem_classes=["figures-tex"])


def _gallery(images: list[tuple[str, str]]) -> None:
    gr.Gallery(images, label="Figures", columns=2, height="auto", object_fit="contain", elem_id="figures-gallery")


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["figures"])
    with gr.Row():
        sweep = gr.Dropdown([], label="Sweep", elem_id="figures-sweep", allow_custom_value=True)
        refresh = gr.Button("Refresh", scale=0, elem_id="figures-refresh")

    @gr.render(inputs=[sweep], triggers=[sweep.change, refresh.click, demo.load])
    def report(sweep_name: str | None) -> None:
        folder, message = report_folder(app, sweep_name)
        if folder is None:
            gr.Markdown(message, elem_id="figures-status")
            return
        tables = report_tables(folder)
        images = figure_files(folder)
        written = sum(not table.missing for table in tables)
        gr.Markdown(f"{counted(written, 'table')} and {counted(len(images), 'figure')} in `{folder.name}/`; the "
                    "main table first, the others folded: open one to read it.", elem_id="figures-status")
        incomplete, warning = report_marks(folder, tables)
        # Always there (empty without a mark): a block that comes and goes between two reports made Gradio drop
        # the last table of the next one.
        gr.Markdown(incomplete, visible=bool(incomplete), elem_id="figures-incomplete",
                    elem_classes=["judge-check-failed"])
        gr.Markdown(warning, visible=bool(warning), elem_id="figures-judge-warning",
                    elem_classes=["judge-check-failed"])
        for index, table in enumerate(tables):
            _table_block(table, index)
            if index == 0 and images:
                with gr.Accordion("Figures", open=True, elem_id="figures-figures"):
                    _gallery(images)
        if not tables and images:
            _gallery(images)

    def on_refresh(current):
        names = report_sweeps(app)
        return gr.Dropdown(choices=names, value=current if current in names else (names[0] if names else None))

    refresh.click(on_refresh, [sweep], [sweep])
    demo.load(on_refresh, [sweep], [sweep])
    return {"sweep": sweep}
