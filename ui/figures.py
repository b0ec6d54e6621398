"""Figures tab: the PNG figures a sweep's report wrote to reports/<sweep>/, with its markdown tables."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from ui.common import AppSettings, texts, user_error


def report_sweeps(app: AppSettings) -> list[str]:
    """Sweeps with a report folder, most recently written first."""
    if not app.reports_dir.exists():
        return []
    folders = [p for p in app.reports_dir.iterdir() if p.is_dir()]
    return [p.name for p in sorted(folders, key=lambda p: -p.stat().st_mtime)]


def _folder(app: AppSettings, sweep: str) -> Path:
    folder = (app.reports_dir / sweep).resolve()
    # The sweep name comes from the page: never leave the reports folder.
    if app.reports_dir.resolve() not in folder.parents:
        raise user_error("Unknown sweep.")
    return folder


def figures(app: AppSettings, sweep: str | None) -> tuple[list[tuple[str, str]], str]:
    """(path, caption) per figure, and the report's markdown tables joined."""
    if not sweep:
        return [], texts()["no_sweeps"]
    folder = _folder(app, sweep)
    images = [(str(p), p.stem.replace("_", " ")) for p in sorted(folder.glob("*.png"))]
    tables = "\n\n".join(f"#### {p.stem.replace('_', ' ')}\n{p.read_text()}" for p in sorted(folder.glob("*.md")))
    if not images and not tables:
        return [], f"No figures in `{folder.name}/` yet."
    return images, tables


def table_files(app: AppSettings, sweep: str | None) -> list[str] | None:
    """The report's tables as files to download: CSV and LaTeX."""
    if not sweep:
        return None
    folder = _folder(app, sweep)
    found = [str(p) for suffix in ("*.csv", "*.tex") for p in sorted(folder.glob(suffix))]
    return found or None


def show(app: AppSettings, sweep: str | None):
    if sweep and sweep not in report_sweeps(app):  # the message replaces the previous sweep's figures and tables
        return [], texts()["no_report_folder"].format(sweep=sweep, reports=app.reports_dir), None
    images, tables = figures(app, sweep)
    return images, tables, table_files(app, sweep)


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["figures"])
    with gr.Row():
        sweep = gr.Dropdown([], label="Sweep", elem_id="figures-sweep", allow_custom_value=True)
        refresh = gr.Button("Refresh", scale=0)
    gallery = gr.Gallery(label="Figures", columns=2, height="auto", object_fit="contain", elem_id="figures-gallery")
    downloads = gr.File(label="Tables to download (CSV, LaTeX)", file_count="multiple", interactive=False,
                        elem_id="figures-downloads")
    tables = gr.Markdown(elem_id="figures-tables")

    def on_refresh(current):
        names = report_sweeps(app)
        return gr.Dropdown(choices=names, value=current if current in names else (names[0] if names else None))

    refresh.click(on_refresh, [sweep], [sweep])
    sweep.change(lambda s: show(app, s), [sweep], [gallery, tables, downloads])
    demo.load(on_refresh, [sweep], [sweep]).then(lambda s: show(app, s), [sweep], [gallery, tables, downloads])
    return {"sweep": sweep, "gallery": gallery}
