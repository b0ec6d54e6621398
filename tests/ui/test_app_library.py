"""The app lays out what the library says: the catalog as sweep configs resolve it (its judges included), AtAvg as the
study computes it, and each model's note in the live list from its backend's capabilities (no browser, no model)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml
from gradio.layouts import Tab

from narrative_eval.backends import BACKENDS, Backend, SlowStart, backend
from narrative_eval.config import load_config
from narrative_eval.metrics import at_avg, at_avg_names
from narrative_eval.studies.live import live_form
from narrative_eval.study import load_study
from ui import launch, live
from ui.app import build_app
from ui.common import AppSettings, at_avg_of, study_named

CATALOG = {
    "models": {
        "tiny": {"backend": "llama_cpp", "weights": "embedded:smollm2-135m-instruct", "quantization": "gguf-q4_1"},
        "tiny-vllm": {"backend": "vllm", "weights": "embedded:smollm2-135m-instruct"},
        "keyed": {"backend": "openai_compatible", "weights": "served", "options": {"base_url": "http://127.0.0.1:9/v1",
                                                                                    "api_key_env": "APP_TEST_KEY"}},
        "slow-plugin": {"backend": "slow_demo", "weights": "embedded:smollm2-135m-instruct"},
    },
    "judges": {"tiny-strict": {"model": "tiny", "rubric": "infilling_narrative", "max_new_tokens": 77, "seed": 3}},
}


class SlowDemo(Backend):
    """A backend from outside the project that says it starts slowly."""

    @classmethod
    def slow_start(cls, spec):
        return SlowStart(120.0, "demo: two minutes to start")

    def generate(self, conversations, params):
        raise NotImplementedError


@pytest.fixture()
def app(tmp_path, monkeypatch) -> AppSettings:
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "models.yaml").write_text(yaml.safe_dump(CATALOG, sort_keys=False))
    monkeypatch.delenv("APP_TEST_KEY", raising=False)
    backend("slow_demo")(SlowDemo)
    yield AppSettings(configs_dir=configs, jobs_dir=tmp_path / "jobs")
    BACKENDS.remove("slow_demo")


def test_a_grid_built_in_the_form_uses_the_catalogs_judges(app, tmp_path, repo_root):
    assert launch.judge_names(launch.model_catalog(app)) == ["tiny-strict", "tiny-vllm", "keyed", "slow-plugin"]
    raw = launch.grid_config(app, "infilling", "form", ["tiny"], ["L2"], str(repo_root / "data/infilling/sample.jsonl"), 4, [0],
                             "tiny-strict", 32, 0.3)
    (tmp_path / "form.yaml").write_text(yaml.safe_dump(raw))
    config = load_config(tmp_path / "form.yaml")
    judge = config.judges[0]
    assert (judge.id, judge.rubric, judge.max_new_tokens, judge.seed) == ("tiny-strict", "infilling_narrative", 77, 3)
    assert config.models[0].quantization == "gguf-q4_1" and judge.model == config.models[0]
    # A catalog model without a judge entry judges greedily under its own name, as the form always did.
    raw = launch.grid_config(app, "infilling", "form", ["tiny"], ["L2"], "data.jsonl", None, [0], "tiny-vllm", 32, 0.3)
    assert raw["judges"][0]["id"] == "tiny-vllm-judge" and raw["judges"][0]["model"]["backend"] == "vllm"


def test_the_live_model_list_says_what_each_backend_declares(app):
    labels = dict((name, label) for label, name in live.model_choices(app))
    assert labels["tiny"] == "tiny"
    assert labels["keyed"] == "keyed — needs APP_TEST_KEY"
    assert labels["slow-plugin"] == "slow-plugin — demo: two minutes to start"
    assert labels["tiny-vllm"].startswith("tiny-vllm — vLLM")  # vLLM's own estimate, CPU or GPU build
    assert list(labels)[-1] == "keyed"  # what cannot run here comes last
    form = live_form(load_study("infilling"))
    spec = live.check_inputs(app, form, {"passage": "A ______ b."}, "tiny", "L2")
    assert (spec.id, spec.quantization) == ("tiny", "gguf-q4_1")
    with pytest.raises(live.Refused, match="needs APP_TEST_KEY"):
        live.check_inputs(app, form, {"passage": "A ______ b."}, "keyed", "L2")


def test_loading_status_counts_against_the_backends_estimate(app):
    spec = live.catalog_spec(live.model_catalog(app), "slow-plugin")
    assert live.loading_status(spec, 30.4) == ("loading slow-plugin… ▰▰▰▱▱▱▱▱▱▱ 30 s of about 120 s "
                                               "(demo: two minutes to start)")
    assert live.loading_status(live.catalog_spec(live.model_catalog(app), "tiny"), 2.0) == "loading tiny… 2 s"


def test_at_avg_is_the_metrics_packages():
    row = {name: 0.1 * (index + 1) for index, name in enumerate(at_avg_names())}
    assert at_avg_of(row) == at_avg(row)
    assert math.isnan(at_avg_of({**row, at_avg_names()[0]: None}))
    assert math.isnan(at_avg_of({name: value for name, value in row.items() if name != at_avg_names()[-1]}))


def test_compare_events_take_a_run_of_the_previous_sweep_without_an_error(tmp_path):
    """An event sent just before a new sweep replaced the run list still carries the old runs: Gradio's own check of a
    CheckboxGroup refuses them (an error in the app's log), so the events that read the list take the page's values
    as sent, and such a run is never drawn. Those events, and the sweep's, run one at a time in the order sent."""
    import gradio as gr

    from ui import compare

    with gr.Blocks() as demo:
        parts = compare.build(AppSettings(configs_dir=tmp_path, jobs_dir=tmp_path / "jobs"), demo)
    runs = parts["runs"]
    with pytest.raises(gr.Error, match="not in the list of choices"):
        gr.CheckboxGroup(choices=[("new", "run-of-the-new-sweep")]).preprocess(["run-of-the-old-sweep"])
    readers = [fn for fn in demo.fns.values() if runs in fn.inputs]
    assert len(readers) >= 8 and not [fn.name for fn in readers if fn.preprocess]
    # The events that lead to the view run one at a time, in the order sent, so a view drawn for older values never
    # lands after the one drawn for a click.
    drawing = [fn for fn in demo.fns.values() if runs in fn.inputs or parts["view"] in fn.outputs]
    assert {(fn.concurrency_id, fn.concurrency_limit) for fn in drawing} == {("compare-view", 1)}
    assert "run-card" not in compare.render(study_named(None), "no-such-sweep", ["run-of-the-old-sweep"], 0, "instance-1")


def test_an_idle_app_polls_its_queue_every_20_ms_not_every_millisecond():
    """Gradio's queue looks for work every 1 ms while it has none (3 % of a core for an idle app); the app slows that
    to QUEUE_POLL_S and never speeds up a slower default."""
    import gradio as gr

    from ui.__main__ import QUEUE_POLL_S, _slow_idle_polling

    with gr.Blocks() as demo:
        gr.Markdown("idle")
    demo.queue()
    assert demo._queue.sleep_when_free < QUEUE_POLL_S  # Gradio's own default, which the app changes
    demo._queue.progress_update_sleep_when_free = 0.5
    _slow_idle_polling(demo)
    assert demo._queue.sleep_when_free == QUEUE_POLL_S
    assert demo._queue.progress_update_sleep_when_free == 0.5


def test_a_page_that_closes_with_two_event_streams_open_leaves_no_traceback(monkeypatch):
    """Two events in flight on one page means two open event streams for its session; closing the page cancels both,
    and both clean-ups delete the session. Gradio's second delete raises KeyError and logs a traceback; the app's
    queue takes the second delete as done."""
    import logging
    import threading
    import time

    import gradio as gr
    import httpx

    from ui.__main__ import _forgive_a_second_session_close

    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")  # each open stream hears from the server within 0.2 s
    release = threading.Event()

    def wait_for_release(text):
        release.wait(60)
        return text

    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Textbox()
        box.submit(wait_for_release, box, out, api_name="wait")
    demo.queue()
    _forgive_a_second_session_close(demo)
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    server_log = logging.getLogger("uvicorn.error")
    demo.launch(prevent_thread_lock=True, quiet=True)
    server_log.addHandler(handler)
    try:
        api = demo.local_url.rstrip("/") + "/gradio_api"
        fn_index = next(i for i, fn in demo.fns.items() if fn.api_name == "wait")
        session = "two-streams"
        for _ in range(2):
            join = httpx.post(f"{api}/queue/join", json={"data": ["x"], "fn_index": fn_index, "session_hash": session})
            assert join.status_code == 200, join.text
        with httpx.Client(timeout=60) as first, httpx.Client(timeout=60) as second:
            streams = [client.stream("GET", f"{api}/queue/data", params={"session_hash": session})
                       for client in (first, second)]
            lines = [stream.__enter__().iter_lines() for stream in streams]
            assert all(next(line).startswith("data:") for line in lines)  # both streams are open and served
            for stream in streams:
                stream.__exit__(None, None, None)
        requests_in_flight = demo.server.server_state.tasks  # uvicorn's: a request's task leaves it when it ends
        deadline = time.monotonic() + 60
        while requests_in_flight and time.monotonic() < deadline:  # the server sees the closed connections later
            time.sleep(0.05)
        assert not requests_in_flight
        sessions = demo._queue.pending_messages_per_session
        assert session not in sessions
        assert errors == [], [record.getMessage() for record in errors]
    finally:
        release.set()
        server_log.removeHandler(handler)
        demo.close()


def test_a_tables_latex_download_is_written_once_per_version_of_its_csv(tmp_path):
    """The Figures tab is drawn again on every page load: its LaTeX files are made once per CSV version (not a new
    temporary folder per table per draw), and a rewritten CSV gets a file of its own."""
    from narrative_eval.reports.catalog import FoundTable, shown_table
    from ui.figures import latex_file

    csv = tmp_path / "main.csv"
    csv.write_text("model,at_avg\nsmollm2,0.5\n")
    table = FoundTable(csv, "Main results", "AtAvg per model.")
    first = latex_file(table, shown_table(table))
    assert latex_file(table, shown_table(table)) == first
    assert "smollm2" in open(first).read() and "\\caption{Main results}" in open(first).read()
    csv.write_text("model,at_avg\ngemma3,0.125\n")
    second = latex_file(table, shown_table(table))
    assert second != first and "gemma3" in open(second).read() and "smollm2" in open(first).read()


def test_compare_counts_a_fill_as_rated_above_4_as_high_pct_does():
    """The 'only fills a judge rated above 4' filter reads the library's per-row High% (a failed judgment counts for
    nothing), not a count of its own."""
    from ui.compare import judged_high

    table = pd.DataFrame({"instance_id": ["a", "b", "c"], "judge/j/fluency": [5, 3, 5],
                          "judge/j/qavg": [4.6, 3.0, 4.8], "judge/j/status": ["ok", "ok", "failed"]})
    assert judged_high(table) == [True, False, False]
    assert judged_high(table.iloc[:0]) == []


def test_one_rating_flow_serves_every_sub_tab_of_annotate(tmp_path):
    """Fills, any other single-turn study's outputs (the continuation example's) and stories share the next-item and
    save steps (annotate_common): each sub-tab says its own words, and a mistake is said under the field it is
    about."""
    from functools import partial

    from narrative_eval import annotations
    from ui import annotate, annotate_outputs, annotate_stories
    from ui.annotate_common import save_rating, show_next
    from ui.common import FORM, FormError

    store = annotations.AnnotationStore(tmp_path / "ratings.sqlite")
    continuation = load_study("continuation")
    rated = [study.name for study in annotate_outputs.rated_studies("infilling")]
    assert "continuation" in rated and not {"infilling", "incremental-delivery"} & set(rated)  # single-turn, not its own
    for source, rating_of in ((annotate.fills(), annotate.fill_rating),
                              (annotate_outputs.source(continuation), partial(annotate_outputs.output_rating, continuation)),
                              (annotate_stories.story_source(), annotate_stories.story_rating)):
        for rater, sweep, field in (("", "any", "rater"), ("ann", None, "sweep")):
            with pytest.raises(FormError) as refused:
                show_next(source, store, rater, "pointwise", sweep)
            assert refused.value.field == field
        with pytest.raises(FormError, match="first") as refused:
            save_rating(source, rating_of, store, None, "ann")
        assert refused.value.field == FORM
        shown = show_next(source, store, "ann", "pointwise", "no-such-sweep")
        assert shown[0] is None and source.nothing_left in shown[1] and len(shown) == 4 + source.inputs
    state = {"item_id": "x", "shown_at": 0.0}
    with pytest.raises(FormError, match="Rate all 3 dimensions") as refused:  # the continuation rubric's three
        annotate_outputs.output_rating(continuation, state, "ann", 1.0, 4, None, 3)
    assert refused.value.field == "scores"
    rating = annotate_outputs.output_rating(continuation, state, "ann", 1.0, 4, 2, 3)
    assert rating.scores == {"fluency": 4, "coherence": 2, "progression": 3} and rating.kind == "pointwise"


def test_the_tabs_are_the_generic_ones_and_each_studys_own_views():
    """Conversations is the incremental study's own view (Study.viewers), laid out after Launch like any study's."""
    tabs = [block.label for block in build_app().blocks.values() if isinstance(block, Tab) and block.parent.elem_id == "tabs"]
    assert tabs == ["Runs", "Compare", "Fill live", "Launch", "Conversations", "Annotate", "Figures"]
    assert [view.title for view in load_study("incremental-delivery").viewers()] == ["Conversations"]
    assert all(not study.viewers() for study in (load_study("infilling"), load_study("continuation")))
