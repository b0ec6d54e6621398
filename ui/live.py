"""Fill live, for every single-turn study: the study, then its prompt setting, a model and one item's fields (typed,
or an item of a data file) as the study's live form asks for them (narrative_eval.studies.live); the reply streams
into the item's text, the study's answer step takes the answer from it, and the automatic metrics are computed
against the reference when one is given.

An item the form cannot take (a field the study refuses, too long for the model, a model that cannot run here) is
refused with a message by the inputs; the outputs then show the item's text as it is now, never a previous answer."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
from pydantic import ValidationError

from narrative_eval.backends import CachedBackend, missing, slow_start
from narrative_eval.cells import BackendPool
from narrative_eval.config import resolve_model
from narrative_eval.errors import UserError
from narrative_eval.evaluation import Item
from narrative_eval.metrics import AT_AVG, at_avg, metric_label, score_all
from narrative_eval.records import GenerationParams, ModelSpec
from narrative_eval.studies.live import LiveField, LiveForm, live_form, prompt_setting_choices
from ui.common import (FORM, AppSettings, FieldErrors, data_files, esc, model_catalog, passage_html,
                       single_turn_studies, texts)

# llama.cpp models are not safe to call from two threads at once; live fills take turns.
ENGINE_LOCK = threading.Lock()
"""Held while a model generates here: fills, answers and unloads take turns on the app's engines."""
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
        """The text this warning was about: pressing the button again with it goes ahead."""
        self.field = field
        """The input it is about (a field of the study's form, 'model', 'setting'; FORM: the form as a whole)."""


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


def _no_metrics() -> pd.DataFrame:
    return pd.DataFrame({"metric": [], "score": []})


def _metrics_frame(answer: str, gold: str) -> pd.DataFrame:
    scores = {name: values[0] for name, values in score_all([answer], [gold]).items()}
    with suppress(KeyError):  # AtAvg needs every one of its metrics
        scores[AT_AVG] = at_avg(scores)
    return pd.DataFrame({"metric": [metric_label(name) for name in scores],
                         "score": [round(float(v), 4) for v in scores.values()]})


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


def check_inputs(app: AppSettings, form: LiveForm, values: Mapping[str, Any], model: str | None,
                 setting: str | None) -> ModelSpec:
    """The model's spec from the catalog, once the typed values, model and setting can make an answer; else Refused."""
    problem = form.problem(values, setting)
    if problem is not None:
        raise Refused(problem[1], field=problem[0])
    if not model:
        raise Refused("Pick a model.", field="model")
    spec = catalog_spec(model_catalog(app), model)
    need = missing(spec)
    if need:
        raise Refused(f"**{esc(model)}** {need} to run from here; pick a model without a note (the embedded ones "
                      "run offline), or set what it needs before starting the app.", field="model")
    if not setting:
        raise Refused("Pick a prompt setting.", field="setting")
    return spec


def check_length(form: LiveForm, text: str, model: str, tokens: int, counted: bool, window: int | None,
                 max_tokens: int, warned: str | None) -> None:
    """Refuse a prompt the model's context cannot hold; ask once before reading a long text."""
    field = next((f for f in form.all_fields() if f.name == form.text_field), LiveField(form.text_field, ""))
    if window and tokens + max_tokens > window:
        raise Refused(f"The prompt is {tokens:,} tokens and the reply may take {max_tokens} more: over "
                      f"**{esc(model)}**'s context window of {window:,} tokens. Shorten the {field.called} or lower "
                      "Max new tokens.", field=field.name)
    limit = long_passage_chars()
    if len(text) > limit and warned != text:
        about = f"{tokens:,} tokens" if counted else f"about {tokens:,} tokens"
        raise Refused(f"The {field.called} is {len(text):,} characters, over the {limit:,} this tab expects: reading "
                      f"its {about} takes a while on a CPU. Press **{form.action}** again to {form.verb} it anyway.",
                      warned=text, field=field.name)


def answer_status(form: LiveForm, item: Item, answer: Any, after: str = "") -> str:
    """What the study's form says of the answer (then `after`), its warnings below."""
    line, *warnings = form.notes(item, answer)
    return line + after + "".join(f"\n\n{warning}" for warning in warnings)


def live_fill(app: AppSettings, form: LiveForm, values: Mapping[str, Any], model: str, setting: str,
              temperature: float, max_tokens: float, warned: str | None = None) -> Iterator[tuple]:
    """Stream one answer: yields (text html, raw reply, metrics, status line, warned text, refusal or None)."""
    try:
        yield from _fill(app, form, values, model, setting, temperature, int(max_tokens), warned)
    except Refused as problem:
        # Every output is reset, so nothing on the page belongs to an earlier item.
        yield passage_html(form.text(values), None), "", _no_metrics(), "", problem.warned, problem


def _fill(app: AppSettings, form: LiveForm, values: Mapping[str, Any], model: str, setting: str, temperature: float,
          max_tokens: int, warned: str | None) -> Iterator[tuple]:

    spec = check_inputs(app, form, values, model, setting)
    item, text = form.item(values, setting), form.text(values)
    cell = form.cell(setting, spec)
    params = GenerationParams(temperature=float(temperature), max_new_tokens=max_tokens, seed=0)
    pending = passage_html(text, "…", "live-fill pending")

    def frame(view: str, status: str, raw: str = "", metrics: pd.DataFrame | None = None) -> tuple:
        return view, raw, _no_metrics() if metrics is None else metrics, status, warned, None

    engine = yield from load_with_progress(spec, lambda status: frame(pending, status))
    messages = form.messages(cell, item)
    tokens, counted = prompt_tokens(engine.backend, messages)
    check_length(form, text, model, tokens, counted, engine.backend.context_window, max_tokens, warned)
    yield frame(pending, f"reading the prompt ({tokens:,} tokens)" if counted
                else f"reading the prompt (about {tokens:,} tokens, estimated from its length)")
    reply = ""
    with ENGINE_LOCK:
        for piece in engine.stream(messages, params):
            reply += piece
            yield frame(passage_html(text, form.streamed(reply) or "…", "live-fill streaming"), "generating…", reply)
    answer = form.study.answer(cell, item, reply)
    html = passage_html(text, answer.text or form.streamed(reply) or "(empty reply)", "live-fill done")
    reference = item.references.get(form.study.reference, "")
    called = next((f.called for f in form.all_fields() if f.name == form.reference_field), form.reference_field)
    if reference and answer.text:
        yield frame(html, answer_status(form, item, answer, f" · scoring against the {called}…"), reply)
        yield frame(html, answer_status(form, item, answer), reply, _metrics_frame(answer.text, reference))
    else:
        yield frame(html, answer_status(form, item, answer, "" if reference else f" · no {called}, no metrics"), reply)


def items_of(form: LiveForm, path: str | None, repo: Path) -> dict[str, Item]:
    """Item id -> item of a data file (relative to the repo) as the study reads it; {} when it cannot be read."""
    return {item.id: item for item in form.items_in(repo / path)} if path else {}


def item_choices(form: LiveForm, path: str | None, repo: Path) -> list[tuple[str, str]]:
    return [(form.label(item), item_id) for item_id, item in items_of(form, path, repo).items()]


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["live"])
    forms = {name: live_form(study) for name, study in single_turn_studies().items()}
    first = next(iter(forms))
    files = data_files(app, forms[first].study)
    models = model_choices(app)
    errors = FieldErrors("live")
    # Every study's boxes are laid out once, in a group of its own shown while it is picked; a box is `live-<field>`
    # unless an earlier study's form has a field of that name.
    keys: dict[str, dict[str, str]] = {}
    boxes: list[tuple[str, LiveField, gr.components.Component]] = []
    groups: dict[str, gr.Column] = {}
    with gr.Row():
        with gr.Column(scale=3):
            with gr.Row():
                study = gr.Dropdown(list(forms), value=first, label="Study", elem_id="live-study")
                source = gr.Dropdown(files, value=files[0] if files else None, label="Pick from data",
                                     elem_id="live-source")
                picked = gr.Dropdown([], label="Item", elem_id="live-instance")
            help_text = gr.Markdown(forms[first].help, elem_id="live-help")
            for name, form in forms.items():
                keys[name] = {}
                with gr.Column(visible=name == first) as groups[name]:
                    for field in form.all_fields():
                        used = {key for study_keys in keys.values() for key in study_keys.values()}
                        key = field.name if field.name not in used else f"{name}-{field.name}"
                        keys[name][field.name] = key
                        if field.bounds is not None:
                            box = gr.Number(field.value, minimum=field.bounds[0], maximum=field.bounds[1], precision=0,
                                            label=field.label, elem_id=f"live-{key}")
                        else:
                            box = gr.Textbox(field.value, lines=field.lines, label=field.label, elem_id=f"live-{key}")
                        boxes.append((name, field, box))
                        errors.box(key)
        with gr.Column(scale=2):
            model = gr.Dropdown(models, value=models[0][1] if models else None, label="Model", elem_id="live-model",
                                info="Models with a note cannot run from here as they are.")
            errors.box("model")
            choices, default = prompt_setting_choices(forms[first].study)
            setting = gr.Dropdown(choices, value=default[0] if default else None, label="Prompt setting",
                                  elem_id="live-setting")
            errors.box("setting")
            temperature = gr.Slider(0.0, 1.5, value=0.3, step=0.05, label="Temperature")
            max_tokens = gr.Slider(8, 512, value=96, step=8, label="Max new tokens", elem_id="live-max-tokens")
            with gr.Row():
                go = gr.Button(forms[first].action, variant="primary", elem_id="live-go")
                unload_button = gr.Button("Unload model", scale=0, elem_id="live-unload")
            errors.box(FORM)
            message = gr.Markdown(elem_id="live-message")
    status = gr.Markdown(elem_id="live-status")
    view = gr.HTML(passage_html(forms[first].text({f.name: f.value for f in forms[first].all_fields()}), None),
                   elem_id="live-view")
    with gr.Row():
        raw = gr.Textbox(label="Raw reply", lines=4, interactive=False, elem_id="live-raw")
        metrics = gr.Dataframe(_no_metrics(), label="Metrics vs the reference", interactive=False,
                               elem_id="live-metrics")
    warned = gr.State(None)
    components = [box for _, _, box in boxes]

    def typed(name: str, values: tuple) -> dict[str, Any]:
        """The picked study's fields from every box's value."""
        return {field.name: value for (owner, field, _), value in zip(boxes, values, strict=True) if owner == name}

    def on_study(name: str, path: str | None):
        form = forms[name]
        titled, chosen = prompt_setting_choices(form.study)
        opening = {f.name: f.value for f in form.all_fields()}
        paths = data_files(app, form.study)
        path = path if path in paths else paths[0] if paths else None
        return (gr.Dropdown(choices=titled, value=chosen[0] if chosen else None), gr.Button(value=form.action),
                form.help, gr.Dropdown(choices=paths, value=path),
                gr.Dropdown(choices=item_choices(form, path, app.repo), value=None),
                passage_html(form.text(opening), None), *(gr.Column(visible=n == name) for n in groups))

    def on_setting(name: str, setting_: str | None):
        shown = {field.name for field in forms[name].fields(setting_)}
        return [gr.update(visible=field.name in shown) if owner == name else gr.skip() for owner, field, _ in boxes]

    def on_source(name: str, path: str | None):
        return gr.Dropdown(choices=item_choices(forms[name], path, app.repo), value=None)

    def on_pick(name: str, path: str | None, item_id: str | None):
        item = items_of(forms[name], path, app.repo).get(item_id or "")
        if item is None:
            return *(gr.skip() for _ in boxes), gr.skip()
        values = forms[name].values(item)
        return (*(values.get(field.name, gr.skip()) if owner == name else gr.skip() for owner, field, _ in boxes),
                passage_html(forms[name].text(values), None))

    study.change(on_study, [study, source], [setting, go, help_text, source, picked, view, *groups.values()])
    setting.change(on_setting, [study, setting], components)
    source.change(on_source, [study, source], [picked])
    picked.input(on_pick, [study, source, picked], [*components, view])

    def on_fill(name, setting_, model_, temperature_, max_tokens_, warned_, *values):
        form = forms[name]
        for *shown, refused in live_fill(app, form, typed(name, values), model_, setting_, temperature_, max_tokens_,
                                         warned_):
            if refused is None:
                yield *shown, *errors.said()
            else:
                yield *shown, *errors.said(keys[name].get(refused.field, refused.field), str(refused))

    # Answers and unloads take turns: a model is never closed under an answer that is using it.
    go.click(on_fill, [study, setting, model, temperature, max_tokens, warned, *components],
             [view, raw, metrics, status, warned, *errors.outputs], concurrency_limit=1, concurrency_id="live-engine")

    def on_unload(name: str | None) -> str:
        return unload(app, name)

    unload_button.click(on_unload, [model], [message], concurrency_limit=1, concurrency_id="live-engine")
    demo.load(on_source, [study, source], [picked])
    demo.load(on_setting, [study, setting], components)
    return {"study": study, "view": view, "go": go}
