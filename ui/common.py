"""What every tab shares: the app's settings, reading runs back from MLflow, and rendering passages safely."""

from __future__ import annotations

import html
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
import yaml

from narrative_eval import tracking
from narrative_eval.config import CATALOG_NAME, load_catalog
from narrative_eval.data.instances import BLANK_RE
from narrative_eval.evaluation import SingleTurnStudy
from narrative_eval.metrics import at_avg, at_avg_names
from narrative_eval.records.keys import parse_judge_key
from narrative_eval.reports.judge_checks import judge_warning
from narrative_eval.stats.judge_checks import FAIL, TAG_PREFIX, failed_in_tags
from narrative_eval.studies.live import item_files
from narrative_eval.study import STANDARD
from narrative_eval.study import STUDIES as STUDY_REGISTRY
from narrative_eval.study import all_studies

REPO = Path(__file__).resolve().parents[1]
"""The repository root (the app resolves data, reports and configs against it)."""

STUDIES = tuple(entry.meta["experiment"] for entry in STUDY_REGISTRY.entries())
"""MLflow experiments, one per registered study: the project's own first (the tabs open on the first), then the
plugins' (the registry lists them in that order)."""


TEXTS_PATH = Path(__file__).with_name("texts.yaml")
"""Tab introductions and help texts."""


@dataclass
class AppSettings:
    """Where the app reads and writes; set once from the command line."""

    repo: Path = REPO
    """Repository root."""
    reports_dir: Path = REPO / "reports"
    """Parent of the sweeps' report folders (reports/<sweep>/)."""
    data_dir: Path = REPO / "data"
    """Shipped benchmark files."""
    configs_dir: Path = REPO / "experiments" / "configs"
    """Sweep configs and the model catalog."""
    jobs_dir: Path = REPO / ".cache" / "ui_jobs"
    """Launched jobs: their configs, logs and state files."""
    annotations_path: Path = REPO / ".cache" / "annotations.sqlite"
    """Human ratings."""
    mlflow_ui_url: str = "http://127.0.0.1:5000"
    """Where `mlflow ui` is expected; runs link there when it answers."""
    max_jobs: int = 1
    """How many launched sweeps may run at once."""


FORM = "form"
"""The field of a mistake about the form as a whole (a config that cannot run, a job limit): said under its buttons."""


class FormError(gr.Error):
    """An expected mistake in a form: said under the field it is about (`FieldErrors`), never logged."""

    field: str = FORM
    """The field it is about (a name of the form's `FieldErrors`), or FORM."""


def user_error(message: str, field: str = FORM) -> FormError:
    """An expected mistake in the page's input, about `field`: shown to the user under that field, never logged with
    a traceback."""
    error = FormError(message, title="Please check", print_exception=False)
    error.field = field
    return error


class FieldErrors:
    """A form's error boxes: a small red line right under each field that can be wrong, and one under its buttons
    for the form as a whole (FORM). Each is empty while nothing is wrong; Gradio's own error toast logs nothing
    either, but it sits away from the field and vanishes."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.boxes: dict[str, gr.Markdown] = {}

    def box(self, field: str = FORM) -> gr.Markdown:
        """Lay out the box of `field` here, under the field ('<prefix>-<field>-error'; the form's: '<prefix>-error')."""
        elem_id = f"{self.prefix}-error" if field == FORM else f"{self.prefix}-{field}-error"
        self.boxes[field] = gr.Markdown("", elem_id=elem_id, elem_classes=["form-error"])
        return self.boxes[field]

    def add(self, field: str, box: gr.Markdown) -> None:
        """Answer in a box laid out elsewhere too (a field that two forms share, such as the rater's name)."""
        self.boxes[field] = box

    def said(self, field: str | None = None, message: str = "", fields: list[str] | None = None) -> list[str]:
        """The text of each box (of `fields`, default all): `message` under `field` (under the form's buttons when
        the field has no box), the others empty; all empty without a field."""
        fields = list(self.boxes) if fields is None else fields
        shown = field if field in fields else FORM
        return [f"⚠ {message}" if field is not None and name == shown else "" for name in fields]

    @property
    def outputs(self) -> list[gr.Markdown]:
        """Every box laid out so far, in the order `beside_the_fields` answers them."""
        return list(self.boxes.values())

    def beside_the_fields(self, handler: Callable[..., Any], outputs: int) -> Callable[..., Any]:
        """`handler` with every box laid out so far as one more output, last (wire it with `*self.outputs`): a
        FormError it raises is written under its field (under the form's buttons when the field has no box), the
        handler's own outputs left as they were; every box is emptied when it succeeds."""
        fields = list(self.boxes)

        @wraps(handler)
        def answered(*values: Any) -> Any:
            try:
                result = handler(*values)
            except FormError as error:
                return (*(gr.skip() for _ in range(outputs)), *self.said(error.field, error.message, fields))
            return (*(result if outputs > 1 else (result,)), *self.said(fields=fields))

        return answered


@lru_cache(maxsize=1)
def texts() -> dict[str, Any]:
    return yaml.safe_load(TEXTS_PATH.read_text())


# --------------------------------------------------------------------------- catalog and data


def model_catalog(settings: AppSettings) -> dict[str, Any]:
    """The model catalog (experiments/configs/models.yaml) as sweep configs read it: its models, its judges and its
    path (names resolve with config.resolve_model and config.resolve_judge)."""
    path = settings.configs_dir / CATALOG_NAME
    return {**load_catalog(path), "path": str(path)}


def data_files(settings: AppSettings, study: SingleTurnStudy) -> list[str]:
    """The study's data files under data/ (those whose items it reads), as paths relative to the repo root."""
    return [str(path.relative_to(settings.repo)) for path in item_files(study, settings.data_dir)]


def config_files(settings: AppSettings) -> list[str]:
    return [str(p.relative_to(settings.repo)) for p in sorted(settings.configs_dir.glob("*.yaml"))
            if p.name != CATALOG_NAME]


# --------------------------------------------------------------------------- MLflow


# Several tabs ask for the same listings when the page loads; a short-lived cache answers them once.
CACHE_SECONDS = 3.0
_listing_lock = threading.Lock()
_listings: dict[tuple[Any, ...], tuple[float, Any]] = {}


def _cached(key: tuple[Any, ...], compute):
    now = time.monotonic()
    with _listing_lock:
        hit = _listings.get(key)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return hit[1]
    value = compute()
    with _listing_lock:
        _listings[key] = (time.monotonic(), value)
    return value


def sweeps(study: str) -> list[str]:
    """The study's sweeps, newest first, without duplicates."""
    def compute() -> list[str]:
        try:
            return list(dict.fromkeys(tracking.list_sweeps(study)))
        except Exception:
            return []

    return list(_cached(("sweeps", study), compute))


def pick_sweep(study: str, current: str | None = None) -> tuple[list[str], str | None]:
    """(the study's sweeps, the one to show): the current choice if it still exists, else the newest sweep with a
    finished cell (a sweep stopped before its first cell ended has nothing to show), else the newest."""
    names = sweeps(study)
    if current in names:
        return names, current

    def compute() -> list[str]:
        try:
            return tracking.finished_sweeps(study)
        except Exception:
            return []

    with_results = _cached(("finished", study), compute)
    return names, next((name for name in with_results if name in names), names[0] if names else None)


def cell_runs(study: str, sweep: str | None, finished_only: bool = True) -> pd.DataFrame:
    if not sweep:
        return pd.DataFrame()

    def compute() -> pd.DataFrame:
        try:
            return tracking.sweep_cell_runs(study, sweep, finished_only=finished_only)
        except Exception:
            return pd.DataFrame()

    runs = _cached(("runs", study, sweep, finished_only), compute).copy()
    if runs.empty:
        return runs
    # A cell still running has logged no params yet: sort by what exists.
    keys = [k for k in ("params.model_id", "params.prompt_setting", "params.condition") if k in runs.columns]
    return (runs.sort_values(keys, na_position="last") if keys else runs).reset_index(drop=True)


def column(runs: pd.DataFrame, name: str, default: Any = "") -> pd.Series:
    return runs[name] if name in runs.columns else pd.Series([default] * len(runs), index=runs.index)


Chosen = str | Sequence[str] | None
"""One value, several, or none (any)."""


def filter_runs(runs: pd.DataFrame, models: Chosen = None, settings: Chosen = None,
                conditions: Chosen = None) -> pd.DataFrame:
    """The runs whose model, prompt setting and condition are among those chosen (any, where none are)."""
    for chosen, name in ((models, "params.model_id"), (settings, "params.prompt_setting"),
                         (conditions, "params.condition")):
        values = [chosen] if isinstance(chosen, str) else list(chosen or ())
        if values and not runs.empty:
            runs = runs[column(runs, name).isin(values)]
    return runs


def run_label(row: pd.Series | dict[str, Any]) -> str:
    """'model · setting · condition' (condition left out when it is the one of a study that declares none)."""
    def text(key: str) -> str:
        value = row.get(key)
        return value if isinstance(value, str) else ""  # missing params come back as NaN

    if not text("params.model_id"):
        # A cell still running has no params yet; its run name says what it is.
        return text("tags.mlflow.runName") or "?"
    parts = [text("params.model_id"), text("params.prompt_setting") or "?"]
    condition = text("params.condition")
    if condition and condition != STANDARD:
        parts.append(condition)
    return " · ".join(parts)


def run_choices(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, run_id) pairs for a dropdown or checkbox group."""
    return [(run_label(row), row["run_id"]) for _, row in runs.iterrows()]


_tables_lock = threading.Lock()
_tables: dict[tuple[str, str], pd.DataFrame] = {}


def run_table(run_id: str, name: str = "generations.json") -> pd.DataFrame:
    """A finished run's logged table (cached: finished runs do not change); empty when absent."""
    key = (run_id, name)
    with _tables_lock:
        if key in _tables:
            return _tables[key]
    try:
        table = tracking.load_table(run_id, name)
    except Exception:
        table = pd.DataFrame()
    with _tables_lock:
        _tables[key] = table
    return table


def run_artifact(run_id: str, name: str) -> Any:
    try:
        return tracking.load_json_artifact(run_id, name)
    except Exception:
        return None


def judge_ids_of(columns: list[str] | pd.Index, prefix: str = "metrics.") -> list[str]:
    """Judge ids present, in order, in run metric columns (`prefix` "metrics.", the default) or in a logged table's
    columns (`prefix` ""): the judges' keys (narrative_eval.records.keys)."""
    found = []
    for name in columns:
        judged = parse_judge_key(name.removeprefix(prefix)) if name.startswith(prefix) else None
        if judged is not None and judged[0] not in found:
            found.append(judged[0])
    return found


def failed_judge_checks(row: pd.Series | dict[str, Any]) -> dict[str, list[str]]:
    """judge -> the control checks it failed on this run (from its `judge_check/<judge>` tags; none when every
    checked judge passed or none was checked)."""
    tags = {key[len("tags."):]: value for key, value in dict(row).items() if isinstance(key, str) and key.startswith("tags.")}
    return {judge: checks or ["unnamed check"] for judge, checks in failed_in_tags(tags).items()}


def judge_failed_checks(study: str, judge: str) -> list[str]:
    """The control checks `judge` failed on any run of the study's experiment (its `judge_check/<judge>` tags); none
    when it passed, was not checked, or the store cannot be read."""
    def compute() -> list[str]:
        try:
            runs = tracking.find_runs(study, f"tags.`{TAG_PREFIX}{judge}` LIKE '{FAIL}%'")
        except Exception:
            return []
        return sorted({c for run in runs for c in failed_in_tags(run.data.tags).get(judge, [])})

    return list(_cached(("judge-checks", study, judge), compute))


def judge_check_note(runs: pd.DataFrame) -> str:
    """One warning per judge that failed its control checks on any of these runs, naming the checks."""
    failed: dict[str, set[str]] = {}
    for _, row in runs.iterrows():
        for judge, checks in failed_judge_checks(row).items():
            failed.setdefault(judge, set()).update(checks)
    return " ".join(f"**{judge_warning(judge, sorted(checks))}.**" for judge, checks in failed.items())


def mlflow_ui_available(url: str) -> bool:
    """True when an MLflow UI answers at url (probed briefly, so a missing server costs nothing noticeable; the answer
    is kept as long as the run listings, so the views a page load draws probe it once)."""
    def probe() -> bool:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=0.4) as response:
                return response.status == 200
        except Exception:
            return False

    return bool(_cached(("mlflow-ui", url), probe))


def run_link(url: str, experiment_id: str, run_id: str) -> str:
    return f"{url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def trace_link(url: str, experiment_id: str, trace_id: str) -> str:
    """A generation's trace (prompt, reply, gold, every score) opened in MLflow's Traces view."""
    return f"{url.rstrip('/')}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}&traceId={trace_id}"


# --------------------------------------------------------------------------- rendering


def esc(text: Any) -> str:
    """HTML-escape anything shown from runs or data (model output is untrusted text)."""
    return html.escape("" if text is None else str(text))


def html_table(frame: pd.DataFrame, table_class: str, scroll_class: str, cell: Callable[[str, Any], str],
               titles: Mapping[str, str] | None = None) -> str:
    """A frame as an HTML table in a scrolling box: its headers escaped (with their `titles` entry, else their own
    name, as tooltip when `titles` is given), each cell's `<td>` as `cell(column, value)` writes it."""
    tooltip = (lambda c: f" title='{html.escape(titles.get(c, c))}'") if titles is not None else (lambda c: "")
    head = "".join(f"<th{tooltip(c)}>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(f"<tr>{''.join(cell(c, v) for c, v in zip(frame.columns, row, strict=True))}</tr>"
                   for row in frame.itertuples(index=False))
    return (f"<div class='{scroll_class}'><table class='{table_class}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def counted(n: int, word: str, words: str | None = None) -> str:
    """'1 cell', '2 cells', '1,024 cells': a count with its noun (`words`: the plural when it is not word + s)."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def number(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(number):
        return "–"
    return f"{number:.{digits}f}"


def passage_html(problem: str, fill: str | None, css_class: str = "fill", placeholder: str = "______",
                 context_words: int | None = None) -> str:
    """The passage with its blank replaced by a highlighted fill (or a highlighted blank when there is none); a text
    without a blank is followed by the fill (an answer that continues it). With `context_words`, only that many words
    either side of it (a column beside others, under the whole passage)."""
    match = BLANK_RE.search(problem or "")
    before, after = (problem or "", "") if match is None else (problem[: match.start()], problem[match.end():])
    if context_words is not None:
        words_before, words_after = before.split(), after.split()
        before = ("… " if len(words_before) > context_words else "") + " ".join(words_before[-context_words:]) + " "
        after = (" " + " ".join(words_after[:context_words]) + (" …" if len(words_after) > context_words else "")
                 if words_after else "")
    if match is None:
        inserted = f' <mark class="{css_class}">{esc(fill)}</mark>' if fill else ""
        return f'<div class="passage">{esc(before.rstrip())}{inserted}</div>'
    if fill:
        inserted = f'<mark class="{css_class}">{esc(fill)}</mark>'
    else:
        inserted = f'<mark class="blank">{esc(placeholder)}</mark>'
    return f'<div class="passage">{esc(before)}{inserted}{esc(after)}</div>'


def at_avg_metrics() -> tuple[str, ...]:
    """The automatic metrics averaged into AtAvg (from the metrics registry, plugins included)."""
    return at_avg_names()


def at_avg_of(row: pd.Series | dict[str, Any]) -> float:
    """A generations row's AtAvg, as the study computes it; NaN when the row lacks one of its metrics."""
    try:
        return at_avg(row)
    except (KeyError, TypeError, ValueError):  # a metric missing from the row, or not a number
        return math.nan


def single_turn_studies() -> dict[str, SingleTurnStudy]:
    """Name -> study of every registered study whose items each get one prompt (plugins included), in registry order."""
    return {study.name: study for study in all_studies() if isinstance(study, SingleTurnStudy)}


def study_named(name: str | None) -> SingleTurnStudy:
    """The single-turn study named, else the first one registered."""
    studies = single_turn_studies()
    return studies.get(name or "") or next(iter(studies.values()))
