"""Fill the blank live: a passage (pasted or from the data), a model and a prompt setting; the reply streams
into the passage, and the automatic metrics are computed against a gold text when one is given."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from functools import cache

import gradio as gr
import pandas as pd

from narrative_eval.data.infilling import BLANK_RE
from ui.common import AppSettings, data_files, esc, instances_by_id, load_catalog, passage_html, texts

TAGS = re.compile(r"<\s*/?\s*answer\s*>", re.IGNORECASE)
# llama.cpp models are not safe to call from two threads at once; live fills take turns.
_engine_lock = threading.Lock()
EXAMPLE_PASSAGE = ("The lighthouse keeper climbed the stairs every evening at dusk. ______ "
                   "By midnight the beam had guided three fishing boats safely into the harbour.")


def instance_choices(path: str | None) -> list[tuple[str, str]]:
    if not path:
        return []
    return [(f"{inst.dataset}/{inst.ref_id} · n={inst.n} · idx {inst.unit_idx}", instance_id)
            for instance_id, inst in instances_by_id(path).items()]


def prompt_settings() -> list[tuple[str, str]]:
    """Every registered infilling prompt setting (plugins included), titled."""
    from narrative_eval.prompts.render import PROMPT_SETTINGS

    entries = [e for e in PROMPT_SETTINGS.entries() if e.meta.get("study") == "infilling"]
    return [(f"{e.name} — {e.target.settings[e.name].get('title', '')}", e.name) for e in entries]


def _metrics_frame(answer: str, gold: str) -> pd.DataFrame:
    from narrative_eval.metrics import at_avg, at_avg_names, score_all

    scores = {name: values[0] for name, values in score_all([answer], [gold]).items()}
    if all(name in scores for name in at_avg_names()):
        scores["at_avg"] = at_avg(scores)
    return pd.DataFrame({"metric": list(scores), "score": [round(float(v), 4) for v in scores.values()]})


@cache
def _pool():
    """The app's backends behind the shared request cache (a repeated live fill is served from it)."""
    from narrative_eval.sweep import BackendPool

    return BackendPool()


def live_fill(app: AppSettings, passage: str, gold: str, n: float, model: str, setting: str, temperature: float,
              max_tokens: float) -> Iterator[tuple[str, str, pd.DataFrame, str]]:
    """Stream one fill: yields (passage html, raw reply, metrics table, status line) as the reply grows."""
    from narrative_eval.records import GenerationParams, InfillingInstance, ModelSpec
    from narrative_eval.studies.infilling import stream_fill

    passage = (passage or "").strip()
    if len(BLANK_RE.findall(passage)) != 1:
        raise gr.Error("The passage needs exactly one blank: six underscores ______ where the missing text goes.")
    catalog = load_catalog(app)
    if model not in catalog:
        raise gr.Error(f"Unknown model {model!r}; the catalog has {', '.join(catalog)}.")
    spec = ModelSpec(id=model, **catalog[model])
    n_sentences = int(n or 1)
    instance = InfillingInstance(dataset="custom", ref_id="live", source_text=passage, problem=passage,
                                 gold_answer=gold or "", n=n_sentences, unit_idx=0)
    params = GenerationParams(temperature=float(temperature), max_new_tokens=int(max_tokens), seed=0)
    empty = pd.DataFrame({"metric": [], "score": []})
    yield passage_html(passage, "…", "live-fill pending"), "", empty, f"loading {esc(model)}…"
    reply, sample = "", None
    with _engine_lock:
        for reply, sample in stream_fill(_pool()(spec), instance, setting, params):
            if sample is None:
                shown = TAGS.sub("", reply).strip() or "…"
                yield passage_html(passage, shown, "live-fill streaming"), reply, empty, "generating…"
    answer = sample.answer
    status = f"extraction: {sample.extraction_status}"
    html = passage_html(passage, answer or TAGS.sub("", reply).strip() or "(empty reply)", "live-fill done")
    if gold and gold.strip() and answer:
        yield html, reply, empty, status + " · scoring against the gold text…"
        yield html, reply, _metrics_frame(answer, gold.strip()), status
    else:
        yield html, reply, empty, status + ("" if gold else " · no gold text, no metrics")


def build(app: AppSettings, demo: gr.Blocks) -> dict[str, gr.components.Component]:
    gr.Markdown(texts()["live"])
    files = data_files(app)
    catalog = list(load_catalog(app))
    settings_ = prompt_settings()
    with gr.Row():
        with gr.Column(scale=3):
            with gr.Row():
                source = gr.Dropdown(files, value=files[0] if files else None, label="Pick from data", elem_id="live-source")
                picked = gr.Dropdown([], label="Instance", elem_id="live-instance")
            passage = gr.Textbox(EXAMPLE_PASSAGE, lines=7, label="Passage with one blank (______)", elem_id="live-passage")
            gold = gr.Textbox("", lines=2, label="Gold text (optional)", elem_id="live-gold")
        with gr.Column(scale=2):
            model = gr.Dropdown(catalog, value=catalog[0] if catalog else None, label="Model", elem_id="live-model")
            setting = gr.Dropdown(settings_, value="L2" if any(v == "L2" for _, v in settings_) else None,
                                  label="Prompt level / paradigm", elem_id="live-setting")
            n = gr.Number(1, minimum=1, maximum=3, precision=0, label="Missing sentences (n)")
            temperature = gr.Slider(0.0, 1.5, value=0.3, step=0.05, label="Temperature")
            max_tokens = gr.Slider(8, 512, value=96, step=8, label="Max new tokens", elem_id="live-max-tokens")
            go = gr.Button("Fill the blank", variant="primary", elem_id="live-go")
    status = gr.Markdown(elem_id="live-status")
    view = gr.HTML(passage_html(EXAMPLE_PASSAGE, None), elem_id="live-view")
    with gr.Row():
        raw = gr.Textbox(label="Raw reply", lines=4, interactive=False, elem_id="live-raw")
        metrics = gr.Dataframe(pd.DataFrame({"metric": [], "score": []}), label="Metrics vs gold", interactive=False,
                               elem_id="live-metrics")

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
        yield from live_fill(app, *values)

    go.click(on_fill, [passage, gold, n, model, setting, temperature, max_tokens],
             [view, raw, metrics, status], concurrency_limit=1)
    demo.load(on_source, [source], [picked])
    return {"passage": passage, "view": view, "go": go}
