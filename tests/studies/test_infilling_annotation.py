"""The infilling study's items for human rating, built from a sweep's logged rows: every fill alone, or every pair of
two runs' fills of one blank and seed, in canonical order, with the passage from the data file (else the prompt
sent), the hidden provenance and the judges' scores."""

from __future__ import annotations

import pandas as pd

from narrative_eval.annotations import item_key
from narrative_eval.studies.infilling.annotation import fill_groups, fill_item

PASSAGE = "The keeper climbed the stairs at dusk. ______ By midnight three boats were safe in the harbour."
MESSAGES = [{"role": "user", "content": f"Fill the blank.\n\n{PASSAGE}\n\nAnswer in <ANSWER> tags."}]


def rows(answers: list[str | None]) -> pd.DataFrame:
    return pd.DataFrame([{"instance_id": "story/s1/1/1", "seed": 0, "answer": answer, "messages": MESSAGES,
                          "judge/j/coherence": 4.0, "judge/j/status": "ok", "trace_id": "tr-1"} for answer in answers])


def test_fills_are_grouped_by_blank_and_seed_and_read_back_as_items():
    runs = pd.DataFrame([{"run_id": run_id, "params.model_id": run_id, "params.prompt_setting": "L2",
                          "params.condition": "standard", "params.data_path": "gone.jsonl"} for run_id in ("b", "a")])
    tables = {"a": rows(["He lit the lamp."]), "b": rows(["  "])}  # b's fill is blank: nothing to rate
    assert [[run["run_id"] for run, _ in group] for group in fill_groups(runs, tables.__getitem__, "pointwise")] == [["a"]]
    tables["b"] = rows(["She opened the door."])
    pairs = fill_groups(runs, tables.__getitem__, "pairwise")
    assert [[run["run_id"] for run, _ in group] for group in pairs] == [["a", "b"]]  # canonical order: by run id
    item = fill_item("infilling", "sweep", "pairwise", pairs[0], lambda path: {})  # the data file is gone
    assert item.item_id == item_key("pairwise", "sweep", "story/s1/1/1", 0, ["b", "a"])
    assert item.context == PASSAGE and item.outputs == ("He lit the lamp.", "She opened the door.")
    assert item.sources[0] == {"run_id": "a", "model": "a", "prompt_setting": "L2", "condition": "standard",
                               "trace_id": "tr-1"}
    assert item.judge_scores == ({"j": {"coherence": 4.0}},) * 2
