"""Fill live reads every single-turn study from its declaration (no browser): the example continuation plugin's form
asks for its setting's template slots and its reference, and its answer is the study's own answer step's (the
browser test in test_fill_live.py scores it against a typed reference); the infilling study's form is its own (a
passage with one blank, its gold text, n)."""

from __future__ import annotations

from narrative_eval.studies.live import live_form
from ui.common import AppSettings, data_files, single_turn_studies
from ui.live import Refused, live_fill

OPENING = "The ferry left the harbour at dawn. Gulls followed it past the lighthouse."


def test_a_plugin_study_answers_an_item_typed_in_its_template_fields():
    forms = {name: live_form(study) for name, study in single_turn_studies().items()}
    form = forms["continuation"]
    assert [field.name for field in form.fields("guided")] == ["domain", "opening", "next_sentence"]
    assert [field.name for field in form.fields("plain")] == ["opening", "next_sentence"]
    assert [field.name for field in forms["infilling"].fields("L2")] == ["passage", "gold", "n"]
    app = AppSettings()
    *_, refused = next(live_fill(app, form, {"opening": OPENING}, "smollm2", "guided", 0.0, 24))
    assert isinstance(refused, Refused) and refused.field == "domain" and "Fill in the domain" in str(refused)
    # No reference typed: no metrics (the browser test scores one against it).
    frames = list(live_fill(app, form, {"domain": "story", "opening": OPENING}, "smollm2", "guided", 0.0, 24))
    view, reply, metrics, line, _, refused = frames[-1]
    assert refused is None and reply.strip() and any(frame[3] == "generating…" for frame in frames)
    answer = form.study.answer(None, None, reply).text
    assert answer and answer in reply and line == f"**Continuation:** {answer} · no next sentence, no metrics"
    assert answer in view and OPENING in view and metrics.empty  # the answer after the opening it continues


def test_the_data_offered_for_a_study_are_the_files_whose_items_it_reads():
    """No folder is named: the passages the builder reads, the incremental study's tasks and the published reference
    rows hold no item of a single-turn study, so neither study is offered them."""
    app = AppSettings()
    for study in single_turn_studies().values():
        assert data_files(app, study) == ["data/infilling/benchmark.csv", "data/infilling/sample.jsonl"], study.name
