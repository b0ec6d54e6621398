"""Answer live tab, Fill live for any single-turn study that declares its prompt file: pick the study and one of its settings, type
the item's fields (the slots of the setting's user template), and the model's reply streams in, then the answer the
study scores in it."""

from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from narrative_eval.evaluation import Item, SingleTurnStudy
from narrative_eval.prompts.render import SLOT, PromptSettings, fill, load_prompt_file
from narrative_eval.records import GenerationParams, Message
from ui.common import AppSettings, FieldErrors, esc, model_catalog, single_turn_studies, texts
from ui.live import ENGINE_LOCK, Refused, catalog_spec, load_with_progress, model_choices

MAX_FIELDS = 4
"""Field boxes laid out; a setting's slots fill the first ones (the others are hidden)."""


def declared_studies() -> dict[str, SingleTurnStudy]:
    """The single-turn studies whose prompts are their declared prompt file (their messages are the platform's)."""
    return {name: study for name, study in single_turn_studies().items() if study.prompts is not None}


def prompt_file_of(study_name: str | None) -> PromptSettings | None:
    study = declared_studies().get(study_name or "")
    return load_prompt_file(study.prompts) if study is not None else None


def setting_fields(study_name: str | None, setting: str | None) -> list[str]:
    """The item fields a setting's user template asks for, in order of first use."""
    prompts = prompt_file_of(study_name)
    if prompts is None or setting not in prompts.settings:
        return []
    return list(dict.fromkeys(match.group(1) for match in SLOT.finditer(prompts.settings[setting]["user"])))


def study_answer(app: AppSettings, study_name: str, setting: str, model: str, fields: dict[str, str],
                 temperature: float, max_tokens: int) -> Iterator[tuple[str, str]]:
    """Stream (reply so far, status) for one item typed in the form, then the study's answer in the whole reply."""
    study = declared_studies().get(study_name or "")
    if study is None:
        raise Refused("Pick a study.", field="setting")
    prompts = load_prompt_file(study.prompts)
    if setting not in prompts.settings:
        raise Refused("Pick a prompt setting.", field="setting")
    empty = [name for name in setting_fields(study_name, setting) if not (fields.get(name) or "").strip()]
    if empty:
        raise Refused(f"Fill in {', '.join(empty)}.", field="fields")
    if not model:
        raise Refused("Pick a model.", field="model")
    spec = catalog_spec(model_catalog(app), model)
    item = Item("live", {name: value.strip() for name, value in fields.items()}, {})
    messages = [Message(role="system", content=prompts.system),
                Message(role="user", content=fill(prompts.settings[setting]["user"], dict(item.fields)))]
    params = GenerationParams(temperature=float(temperature), max_new_tokens=int(max_tokens), seed=0)
    engine = yield from load_with_progress(spec, lambda status: ("", status))
    reply = ""
    with ENGINE_LOCK:
        for piece in engine.stream(messages, params):
            reply += piece
            yield reply, "generating…"
    # A study's answer step reads the reply alone here: there is no cell behind a live item.
    answer = study.answer(None, item, reply)
    yield reply, f"**{esc(study.answer_column)}:** {esc(answer.text) if answer.text else '(none)'}"


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["live_study"])
    studies, models = list(declared_studies()), model_choices(app)
    errors = FieldErrors("live-study")
    with gr.Group():
        with gr.Row():
            study = gr.Dropdown(studies, value=studies[0] if studies else None, label="Study", elem_id="live-study")
            setting = gr.Dropdown([], label="Prompt setting", elem_id="live-study-setting")
            model = gr.Dropdown(models, value=models[0][1] if models else None, label="Model",
                                elem_id="live-study-model")
        errors.box("setting")
        boxes = [gr.Textbox("", lines=3, visible=False, elem_id=f"live-study-field-{i}") for i in range(MAX_FIELDS)]
        errors.box("fields")
        with gr.Row():
            temperature = gr.Slider(0.0, 1.5, value=0.3, step=0.05, label="Temperature")
            max_tokens = gr.Slider(8, 512, value=64, step=8, label="Max new tokens")
            go = gr.Button("Answer", variant="primary", elem_id="live-study-go")
        errors.box("model")
        status = gr.Markdown(elem_id="live-study-status")
        reply = gr.Textbox(label="Reply", lines=4, interactive=False, elem_id="live-study-reply")

    def on_study(name: str | None):
        prompts = prompt_file_of(name)
        names = list(prompts.settings) if prompts is not None else []
        return gr.Dropdown(choices=names, value=names[0] if names else None)

    def on_setting(name: str | None, setting_: str | None):
        fields = setting_fields(name, setting_)[:MAX_FIELDS]
        return [gr.Textbox(visible=i < len(fields), label=fields[i] if i < len(fields) else "")
                for i in range(MAX_FIELDS)]

    def on_answer(name, setting_, model_, temperature_, max_tokens_, *values):
        fields = dict(zip(setting_fields(name, setting_), values, strict=False))
        try:
            for shown, line in study_answer(app, name, setting_, model_, fields, temperature_, max_tokens_):
                yield shown, line, *errors.said()
        except Refused as problem:
            yield "", "", *errors.said(problem.field, str(problem))

    study.change(on_study, [study], [setting])
    setting.change(on_setting, [study, setting], boxes)
    go.click(on_answer, [study, setting, model, temperature, max_tokens, *boxes], [reply, status, *errors.outputs],
             concurrency_limit=1, concurrency_id="live-engine")
    demo.load(on_study, [study], [setting])
    return {"study": study, "go": go, "reply": reply}
