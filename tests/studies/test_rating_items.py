"""Any single-turn study's outputs as rating items, from its declaration alone: the example continuation study (a
plugin with no rating code) gives items that show what its judge sees beside the answer, under its labels, and a
form of its rubric's dimensions; the infilling study's pointwise items keep their ids."""

from __future__ import annotations

import json

import pandas as pd

from narrative_eval.annotations import item_key
from narrative_eval.judges import load_rubric
from narrative_eval.studies.infilling.annotation import fill_groups, fill_item_id
from narrative_eval.studies.live import live_form
from narrative_eval.studies.rating import (answer_label, context_inputs, item_context, output_item_id, outputs,
                                           rating_dimensions, rating_item)
from narrative_eval.study import load_study

OPENING = "The keeper climbed the stairs at dusk. The lamp was cold. The sea was loud."


def runs(*run_ids: str) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": run_id, "params.model_id": f"model-{run_id}", "params.prompt_setting": "plain",
                          "params.condition": "standard", "params.data_path": ""} for run_id in run_ids])


def continuation_rows(answers: list[str | None]) -> pd.DataFrame:
    """Rows as the library's single-turn loop logs them for the continuation study: id, the item's columns, seed,
    what was sent and answered, the reference, the judge's scores."""
    return pd.DataFrame([{"item_id": f"story/s{k}/3", "domain": "story", "opening": OPENING, "seed": 0,
                          "messages": [], "raw_reply": answer, "continuation": answer,
                          "next_sentence": "The true sentence.", "judge/j/status": "ok", "judge/j/fluency": 4.0,
                          "judge/j/coherence": 2.0, "judge/j/progression": 3.0, "judge/j/qavg": 3.0,
                          "trace_id": f"tr-{k}"} for k, answer in enumerate(answers)])


def test_the_continuation_studys_items_come_from_its_declaration():
    study = load_study("continuation")
    # The form: what the judge sees beside the answer (its rubric's `opening`, never the true sentence), the rubric's
    # dimensions with its own labels, the answer under the study's label of its answer column.
    assert context_inputs(study) == [("opening", "Opening")]
    assert rating_dimensions(study) == [(d.key, d.label) for d in load_rubric(study.rubric).dimensions] == [
        ("fluency", "Fluency"), ("coherence", "Coherence with the opening"), ("progression", "Progression")]
    assert answer_label(study) == "Continuation"
    tables = {"a": continuation_rows(["He lit the lamp.", "  "]), "b": continuation_rows([None])}
    found = outputs(study, runs("b", "a"), tables.__getitem__)
    assert [(run["run_id"], row["item_id"]) for run, row in found] == [("a", "story/s0/3")]  # blank answers left out
    item = rating_item(study, "sweep", found[0])
    assert item.item_id == output_item_id(study, "sweep", found[0]) == item_key("pointwise", "sweep", "story/s0/3", 0,
                                                                                ["a"])
    assert (item.kind, item.study, item.instance_id, item.seed) == ("pointwise", "continuation", "story/s0/3", 0)
    assert item_context(item) == {"opening": OPENING} and item.outputs == ("He lit the lamp.",)
    assert "The true sentence." not in item.context and "model-a" not in item.context  # blind
    assert item.sources[0]["model"] == "model-a" and item.sources[0]["trace_id"] == "tr-0"
    assert item.judge_scores == ({"j": {"fluency": 4.0, "coherence": 2.0, "progression": 3.0}},)  # not its QAvg


def test_the_context_is_the_studys_item_when_its_data_file_is_there(repo_root):
    study = load_study("continuation")
    data = repo_root / "data/infilling/sample.jsonl"
    items = live_form(study).items_in(data)
    first = items[0]
    rows = continuation_rows(["Then it rained."]).assign(item_id=first.id, opening="(not read)")
    run = runs("a").assign(**{"params.data_path": str(data)})
    (output,) = outputs(study, run, lambda run_id: rows)
    item = rating_item(study, "sweep", output, lambda path: {i.id: i for i in live_form(study).items_in(path)})
    assert json.loads(item.context) == {"opening": first.fields["opening"]}


def test_the_infilling_studys_pointwise_ids_are_unchanged():
    infilling = load_study("infilling")
    rows = pd.DataFrame([{"instance_id": "story/s1/1/1", "seed": 1, "answer": "He lit the lamp.", "messages": []}])
    (group,) = fill_groups(runs("a"), lambda run_id: rows, "pointwise")
    (output,) = outputs(infilling, runs("a"), lambda run_id: rows)
    assert output_item_id(infilling, "sweep", output) == fill_item_id("sweep", "pointwise", group)
