"""The app: one Blocks with a tab per module."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from narrative_eval import tracking
from narrative_eval.study import all_studies
from ui import annotate, compare, conversations, figures, launch, live, runs
from ui.common import AppSettings, texts
from ui.downloads import download_folder

CSS_PATH = Path(__file__).with_name("style.css")

# (tab title, module): each module's build(settings, demo) lays out its tab and wires its events; the studies' own
# views (Study.viewers) come after Launch.
TABS = (
    ("Runs", runs),
    ("Compare", compare),
    ("Fill live", live),
    ("Launch", launch),
)
LATER_TABS = (
    ("Annotate", annotate),
    ("Figures", figures),
)


def _safe_uri(uri: str) -> str:
    """The tracking URI without credentials (a server URI may embed user:password@)."""
    if "@" in uri and "://" in uri:
        scheme, rest = uri.split("://", 1)
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return uri


def build_app(settings: AppSettings | None = None) -> gr.Blocks:
    settings = settings or AppSettings()
    with gr.Blocks(title=texts()["title"]) as demo:
        gr.Markdown(texts()["header"].format(tracking_uri=_safe_uri(tracking.tracking_uri())), elem_id="app-header")
        with gr.Tabs(elem_id="tabs"):
            for title, module in TABS:
                _module_tab(title, module, settings, demo)
            for study in all_studies():
                for view in study.viewers():
                    with gr.Tab(view.title, id=view.name, elem_id=f"tab-{view.name}"):
                        conversations.build(settings, demo, study, view)
            for title, module in LATER_TABS:
                _module_tab(title, module, settings, demo)
    return demo


def _module_tab(title: str, module, settings: AppSettings, demo: gr.Blocks) -> None:
    name = module.__name__.rsplit(".", 1)[-1]
    with gr.Tab(title, id=name, elem_id=f"tab-{name}"):
        module.build(settings, demo)


def css() -> str:
    return CSS_PATH.read_text()


def allowed_paths(settings: AppSettings) -> list[str]:
    """The only folders the app may serve files from: data, reports, MLflow artifacts and the app's own downloads
    (the Figures tab's LaTeX tables)."""
    paths = [settings.data_dir, settings.reports_dir, settings.repo / "mlruns", download_folder()]
    return [str(p.resolve()) for p in paths]


def blocked_paths(settings: AppSettings) -> list[str]:
    """Never served even if a path rule above would allow it: caches (ratings, request cache, jobs) and the venv."""
    return [str((settings.repo / name).resolve()) for name in (".cache", ".venv", ".git", "mlflow.db")]
