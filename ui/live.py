"""Fill the blank live: a passage (pasted or from the data), a model and a prompt setting; the reply streams
into the passage, and the automatic metrics are computed against a gold text when one is given.

A passage the fill cannot take (no blank, too long for the model, a model that cannot run here) is refused
with a message by the inputs; the outputs then show the passage as it is now, never a previous fill."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from contextlib import suppress
from functools import cache
from typing import Any

import gradio as gr
import pandas as pd
from pydantic import ValidationError

from narrative_eval.backends import CachedBackend, missing, slow_start
from narrative_eval.cells import BackendPool
from narrative_eval.config import resolve_model
from narrative_eval.data.instances import BLANK_RE
from narrative_eval.errors import UserError
from narrative_eval.metrics import AT_AVG, at_avg, metric_label, score_all
from narrative_eval.prompts.render import PROMPT_SETTINGS
from narrative_eval.records import GenerationParams, InfillingInstance, ModelSpec
from narrative_eval.studies.infilling import stream_fill
from narrative_eval.studies.infilling.extraction import repeats_passage
from narrative_eval.studies.infilling.prompts import render_infilling
from ui.common import FORM, AppSettings, FieldErrors, data_files, esc, instances_by_id, model_catalog, passage_html, texts

TAGS = re.compile(r"<\s*/?\s*answer\s*>", re.IGNORECASE)
# llama.cpp models are not safe to call from two threads at once; live fills take turns.
ENGINE_LOCK = threading.Lock()
"""Held while a model generates here: fills, answers and unloads take turns on the app's engines."""
EXAMPLE_PASSAGE = ("The lighthouse keeper climbed the stairs every evening at dusk. ______ "
                   "By midnight the beam had guided three fishing boats safely into the harbour.")
LONG_PASSAGE_ENV = "NARRATIVE_EVAL_LIVE_MAX_CHARS"
LONG_PASSAGE_CHARS = 6000
"""Above this many characters a fill asks first: reading a long prompt on a CPU takes a minute or more."""
CHARS_PER_TOKEN = 4
"""Estimate for engines without a local tokenizer (English prose runs 4-4.5 characters a token)."""
TEMPLATE_TOKENS = 7
"""Per message, the chat template's role markers (SmolLM2's ChatML adds 7; the count stays within a few tokens)."""


class Refused(Exception):
    """An input the fill cannot go ahead with: said under the field it is about, never logged."""

    def __init__(self, message: str, warned: str | None = None, field: str = FORM):
        super().__init__(message)
        self.warned = warned
        """The passage this warning was about: pressing Fill again with it goes ahead."""
        self.field = field
        """The input it is about ('passage', 'model', 'setting'; FORM: the form as a whole)."""


def long_passage_chars() -> int:
    value = os.environ.get(LONG_PASSAGE_ENV, "")
    return int(value) if value.isdigit() else LONG_PASSAGE_CHARS


def catalog_spec(catalog: dict[str, Any], name: str) -> ModelSpec:
    """A catalog model's spec, resolved as a sweep config resolves it; Refused when the catalog cannot give one."""
    try:
        return ModelSpec.model_validate(resolve_model(name, catalog))
    except UserError:
        raise Refused(f"Unknown model {esc(name)}: pick one from the list.", field="model") from None
    except ValidationError as error:
        raise Refused(f"The catalog entry of **{esc(name)}** is not a valid model spec: "
                      f"{esc(error.errors()[0]['msg'])}.", field="model") from None


def model_choices(app: AppSettings) -> list[tuple[str, str]]:
    """(label, name) per catalog model, those that run here first; the others say what they need, and a model slow
    to start says how slow."""
    catalog = model_catalog(app)
    marked = []
    for name in catalog["models"]:
        try:
            spec = catalog_spec(catalog, name)
        except Refused:
            marked.append((name, "is not a valid catalog entry", True))
            continue
        need = missing(spec)
        start = None if need else slow_start(spec)
        marked.append((name, need or (start.note if start else None), need is not None))
    return [(f"{name} — {note}" if note else name, name) for name, note, _ in sorted(marked, key=lambda m: m[2])]


def instance_choices(path: str | None) -> list[tuple[str, str]]:
    if not path:
        return []
    return [(f"{inst.dataset}/{inst.ref_id} · n={inst.n} · idx {inst.unit_idx}", instance_id)
            for instance_id, inst in instances_by_id(path).items()]


def prompt_settings() -> list[tuple[str, str]]:
    """Every registered infilling prompt setting (plugins included), titled."""

    entries = [e for e in PROMPT_SETTINGS.entries() if not isinstance(e.target, str)]  # str: a system prompt
    return [(f"{e.name} — {e.target.settings[e.name].get('title', '')}", e.name) for e in entries]


def _no_metrics() -> pd.DataFrame:
    return pd.DataFrame({"metric": [], "score": []})


def _metrics_frame(answer: str, gold: str) -> pd.DataFrame:
    scores = {name: values[0] for name, values in score_all([answer], [gold]).items()}
    with suppress(KeyError):  # AtAvg needs every one of its metrics
        scores[AT_AVG] = at_avg(scores)
    return pd.DataFrame({"metric": [metric_label(name) for name in scores],
                         "score": [round(float(v), 4) for v in scores.values()]})


def extraction_line(status: str, answer: str | None, passage: str, after: str = "") -> str:
    """How the fill was taken from the reply, in words (then `after`), and a warning below when the fill repeats
    the passage itself."""
    words = texts()["extraction"]
    line = f"extraction: {status} — {words.get(status, status)}{after}"
    return line + (f"\n\n{words['repeats_passage']}" if repeats_passage(answer, passage) else "")


@cache
def _pool() -> BackendPool:
    """The app's backends behind the shared request cache (a repeated live fill is served from it)."""
    return BackendPool()


def loading_status(spec: ModelSpec, seconds: float) -> str:
    """The status line while a model loads: the seconds so far against its backend's estimate, when it has one."""
    start = slow_start(spec)
    if start is None:
        return f"loading {esc(spec.id)}… {seconds:.0f} s"
    filled = round(10 * min(seconds / start.seconds, 1.0))
    return (f"loading {esc(spec.id)}… {'▰' * filled}{'▱' * (10 - filled)} {seconds:.0f} s of about "
            f"{start.seconds:.0f} s ({esc(start.note)})")


def load_with_progress(spec: ModelSpec, show: Callable[[str], tuple],
                       interval: float = 1.0) -> Generator[tuple, None, CachedBackend]:
    """Load the model in a thread; while it loads, yield show(status line) every `interval` s; return the backend."""
    loaded: Future = Future()

    def load() -> None:
        try:
            loaded.set_result(_pool()(spec))
        except BaseException as error:  # raised again in the page's generator, where the fill reports it
            loaded.set_exception(error)

    started = time.monotonic()
    threading.Thread(target=load, daemon=True, name=f"load-{spec.id}").start()
    while True:
        yield show(loading_status(spec, time.monotonic() - started))
        try:
            return loaded.result(timeout=interval)
        except TimeoutError:
            continue


def unload(app: AppSettings, model: str | None) -> str:
    """Unload a model the tab loaded: its memory is freed and its engine processes stop."""
    if not model:
        return ""
    try:
        spec = catalog_spec(model_catalog(app), model)
    except Refused as problem:
        return f"⚠ {problem}"
    if not _pool().release(spec):
        return f"**{esc(model)}** is not loaded."
    return f"Unloaded **{esc(model)}**: its memory is freed, and any engine process it started has stopped."


def prompt_tokens(backend, messages) -> tuple[int, bool]:
    """(tokens of the rendered prompt, whether the model's own tokenizer counted them, else estimated)."""
    counts = [backend.count_tokens(m.content) for m in messages]
    overhead = TEMPLATE_TOKENS * len(messages)
    if None in counts:
        return sum(len(m.content) for m in messages) // CHARS_PER_TOKEN + overhead, False
    return sum(counts) + overhead, True


def check_inputs(app: AppSettings, passage: str, model: str | None, setting: str | None) -> ModelSpec:
    """The model's spec from the catalog, once the passage, model and setting can make a fill; else Refused."""
    if not passage:
        raise Refused("The passage is empty: paste one with a blank (`______`), or pick one from the data.",
                      field="passage")
    blanks = len(BLANK_RE.findall(passage))
    if blanks != 1:
        found = "no blank" if not blanks else f"{blanks} blanks"
        raise Refused(f"The passage has {found}; it needs exactly one: six underscores `______` where the missing "
                      "text goes.", field="passage")
    if not model:
        raise Refused("Pick a model.", field="model")
    spec = catalog_spec(model_catalog(app), model)
    need = missing(spec)
    if need:
        raise Refused(f"**{esc(model)}** {need} to run from here; pick a model without a note (the embedded ones "
                      "run offline), or set what it needs before starting the app.", field="model")
    if not setting:
        raise Refused("Pick a prompt level or paradigm.", field="setting")
    return spec


def check_length(passage: str, model: str, tokens: int, counted: bool, window: int | None, max_tokens: int,
                 warned: str | None) -> None:
    """Refuse a prompt the model's context cannot hold; ask once before reading a long passage."""
    if window and tokens + max_tokens > window:
        raise Refused(f"The prompt is {tokens:,} tokens and the reply may take {max_tokens} more: over "
                      f"**{esc(model)}**'s context window of {window:,} tokens. Shorten the passage or lower "
                      "Max new tokens.", field="passage")
    limit = long_passage_chars()
    if len(passage) > limit and warned != passage:
        about = f"{tokens:,} tokens" if counted else f"about {tokens:,} tokens"
        raise Refused(f"The passage is {len(passage):,} characters, over the {limit:,} this tab expects: reading "
                      f"its {about} takes a while on a CPU. Press **Fill the blank** again to fill it anyway.",
                      warned=passage, field="passage")


def live_fill(app: AppSettings, passage: str, gold: str, n: float, model: str, setting: str, temperature: float,
              max_tokens: float, warned: str | None = None) -> Iterator[tuple]:
    """Stream one fill: yields (passage html, raw reply, metrics, status line, warned passage, refusal or None)."""
    passage = (passage or "").strip()
    try:
        yield from _fill(app, passage, (gold or "").strip(), n, model, setting, temperature, int(max_tokens), warned)
    except Refused as problem:
        # Every output is reset, so nothing on the page belongs to an earlier passage.
        yield passage_html(passage, None), "", _no_metrics(), "", problem.warned, problem


def _fill(app: AppSettings, passage: str, gold: str, n: float, model: str, setting: str, temperature: float,
          max_tokens: int, warned: str | None) -> Iterator[tuple]:

    spec = check_inputs(app, passage, model, setting)
    instance = InfillingInstance(dataset="custom", ref_id="live", source_text=passage, problem=passage,
                                 gold_answer=gold, n=int(n or 1), unit_idx=0)
    params = GenerationParams(temperature=float(temperature), max_new_tokens=max_tokens, seed=0)
    pending = passage_html(passage, "…", "live-fill pending")

    def frame(view: str, status: str, raw: str = "", metrics: pd.DataFrame | None = None) -> tuple:
        return view, raw, _no_metrics() if metrics is None else metrics, status, warned, None

    engine = yield from load_with_progress(spec, lambda status: frame(pending, status))
    tokens, counted = prompt_tokens(engine.backend, render_infilling(setting, instance))
    check_length(passage, model, tokens, counted, engine.backend.context_window, max_tokens, warned)
    yield frame(pending, f"reading the prompt ({tokens:,} tokens)" if counted
                else f"reading the prompt (about {tokens:,} tokens, estimated from its length)")
    reply, sample = "", None
    with ENGINE_LOCK:
        for reply, sample in stream_fill(engine, instance, setting, params):
            if sample is None:
                shown = TAGS.sub("", reply).strip() or "…"
                yield frame(passage_html(passage, shown, "live-fill streaming"), "generating…", reply)
    answer = sample.answer
    html = passage_html(passage, answer or TAGS.sub("", reply).strip() or "(empty reply)", "live-fill done")

    def status(after: str = "") -> str:
        return extraction_line(sample.extraction_status, answer, passage, after)

    if gold and answer:
        yield frame(html, status(" · scoring against the gold text…"), reply)
        yield frame(html, status(), reply, _metrics_frame(answer, gold))
    else:
        yield frame(html, status("" if gold else " · no gold text, no metrics"), reply)


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["live"])
    files = data_files(app)
    models = model_choices(app)
    settings_ = prompt_settings()
    errors = FieldErrors("live")
    with gr.Row():
        with gr.Column(scale=3):
            with gr.Row():
                source = gr.Dropdown(files, value=files[0] if files else None, label="Pick from data", elem_id="live-source")
                picked = gr.Dropdown([], label="Instance", elem_id="live-instance")
            passage = gr.Textbox(EXAMPLE_PASSAGE, lines=7, label="Passage with one blank (______)", elem_id="live-passage")
            errors.box("passage")
            gold = gr.Textbox("", lines=2, label="Gold text (optional)", elem_id="live-gold")
        with gr.Column(scale=2):
            model = gr.Dropdown(models, value=models[0][1] if models else None, label="Model", elem_id="live-model",
                                info="Models with a note cannot run from here as they are.")
            errors.box("model")
            setting = gr.Dropdown(settings_, value="L2" if any(v == "L2" for _, v in settings_) else None,
                                  label="Prompt level / paradigm", elem_id="live-setting")
            errors.box("setting")
            n = gr.Number(1, minimum=1, maximum=3, precision=0, label="Missing sentences (n)")
            temperature = gr.Slider(0.0, 1.5, value=0.3, step=0.05, label="Temperature")
            max_tokens = gr.Slider(8, 512, value=96, step=8, label="Max new tokens", elem_id="live-max-tokens")
            with gr.Row():
                go = gr.Button("Fill the blank", variant="primary", elem_id="live-go")
                unload_button = gr.Button("Unload model", scale=0, elem_id="live-unload")
            errors.box(FORM)
            message = gr.Markdown(elem_id="live-message")
    status = gr.Markdown(elem_id="live-status")
    view = gr.HTML(passage_html(EXAMPLE_PASSAGE, None), elem_id="live-view")
    with gr.Row():
        raw = gr.Textbox(label="Raw reply", lines=4, interactive=False, elem_id="live-raw")
        metrics = gr.Dataframe(_no_metrics(), label="Metrics vs gold", interactive=False, elem_id="live-metrics")
    warned = gr.State(None)

    def on_source(path):
        choices = instance_choices(path)
        return gr.Dropdown(choices=choices, value=None)

    def on_pick(path, instance_id):
        instance = instances_by_id(path).get(instance_id) if path and instance_id else None
        if instance is None:
            return gr.Textbox(), gr.Textbox(), gr.Number(), gr.HTML()
        return instance.problem, instance.gold_answer, instance.n, passage_html(instance.problem, None)

    source.change(on_source, [source], [picked])
    picked.input(on_pick, [source, picked], [passage, gold, n, view])

    def on_fill(*values):
        for *shown, refused in live_fill(app, *values):
            yield *shown, *(errors.said(refused.field, str(refused)) if refused else errors.said())

    # Fills and unloads take turns: a model is never closed under a fill that is using it.
    go.click(on_fill, [passage, gold, n, model, setting, temperature, max_tokens, warned],
             [view, raw, metrics, status, warned, *errors.outputs], concurrency_limit=1, concurrency_id="live-engine")
    def on_unload(name: str | None) -> str:
        return unload(app, name)

    unload_button.click(on_unload, [model], [message], concurrency_limit=1, concurrency_id="live-engine")
    demo.load(on_source, [source], [picked])
    return {"passage": passage, "view": view, "go": go}
