"""Juries (judges.jury): members' verdicts combined per dimension and per checklist requirement, a quorum below
which the jury gives none, controls combined item by item, and the config that declares them."""

from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from narrative_eval.config import load_config
from narrative_eval.errors import UserError
from narrative_eval.judges.checks import ControlItem, ControlJudgment
from narrative_eval.judges.jury import combine_scores, jury_controls, jury_verdict, quorum
from narrative_eval.records import CellSpec, JudgeResult, JurySpec, stable_hash
from narrative_eval.stats.judge_reliability import jury_scores

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data/infilling/sample.jsonl"
CATALOG = REPO / "experiments/configs/models.yaml"


def verdict(judge: str, ok: bool = True, items: list[float] | None = None, **scores: float) -> JudgeResult:
    details = {} if items is None else {"items": [{"constraint_id": f"r{i + 1}", "score": s, "reason": ""}
                                                   for i, s in enumerate(items)]}
    if items is not None:
        scores = {"adherence": statistics.fmean(items)}
    return JudgeResult(judge_id=judge, rubric="r", rubric_hash="h", ok=ok, scores=scores if ok else {}, details=details)


def test_each_aggregate_on_one_output():
    members = {"a": verdict("a", fit=4, flow=2), "b": verdict("b", fit=4, flow=3), "c": verdict("c", fit=1, flow=5)}
    found = {aggregate: jury_verdict(JurySpec(id="jury", judges=("a", "b", "c"), aggregate=aggregate), members).scores
             for aggregate in ("mean", "median", "majority")}
    assert found["mean"] == {"fit": 3.0, "flow": pytest.approx(10 / 3)}
    assert found["median"] == {"fit": 4.0, "flow": 3.0}
    # fit: two members said 4; flow: no two agree, so all three are the most frequent and their mean is it.
    assert found["majority"] == {"fit": 4.0, "flow": pytest.approx(10 / 3)}


def test_below_its_quorum_a_jury_gives_no_verdict_and_names_who_failed():
    jury = JurySpec(id="jury", judges=("a", "b", "c"))
    assert [quorum(n) for n in (2, 3, 4, 5)] == [2, 2, 3, 3]
    two = jury_verdict(jury, {"a": verdict("a", fit=5), "b": verdict("b", fit=3), "c": verdict("c", ok=False)})
    assert two.ok and two.scores == {"fit": 4.0} and two.details["members"] == ["a", "b"]
    one = jury_verdict(jury, {"a": verdict("a", fit=5), "b": verdict("b", ok=False)})
    assert not one.ok and one.scores == {} and one.error == (
        "1 of 3 members gave a valid verdict (failed: b, c; a jury needs 2)")


def test_a_checklist_jury_combines_each_requirement_and_its_adherence_is_their_mean():
    jury = JurySpec(id="jury", judges=("a", "b", "c"), aggregate="majority")
    found = jury_verdict(jury, {"a": verdict("a", items=[1, 0, 1]), "b": verdict("b", items=[1, 1, 0]),
                                "c": verdict("c", items=[0, 1, 0])})
    assert [item["score"] for item in found.details["items"]] == [1.0, 1.0, 0.0]
    assert found.scores == {"adherence": pytest.approx(2 / 3)}


@given(st.lists(st.integers(1, 5), min_size=1, max_size=7), st.sampled_from(["mean", "median", "majority"]))
def test_a_combined_score_lies_within_its_members(values, aggregate):
    combined = combine_scores([float(v) for v in values], aggregate)
    assert min(values) <= combined <= max(values)


@given(st.lists(st.lists(st.integers(1, 5), min_size=3, max_size=3), min_size=1, max_size=20),
       st.sampled_from(["mean", "median", "majority"]))
def test_a_table_of_scores_is_combined_by_the_rule_a_sweeps_jury_follows(rows, aggregate):
    combined, _ = jury_scores(pd.DataFrame(rows, columns=["a", "b", "c"], dtype=float), aggregate)
    assert combined.tolist() == pytest.approx([combine_scores([float(v) for v in row], aggregate) for row in rows])


def test_a_jury_is_checked_on_the_items_every_member_judged():
    def judged(judge: str, good: float, bad: float, instances=("i1", "i2")) -> list[ControlJudgment]:
        return [ControlJudgment(ControlItem("r", "refusal", i, {"answer": "no"}, "below_reference", {"answer": "yes"}),
                                verdict(judge, fit=bad), verdict(judge, fit=good)) for i in instances]

    jury = JurySpec(id="jury", judges=("a", "b"))
    combined = jury_controls(jury, {"a": judged("a", 5, 1), "b": judged("b", 3, 3, ("i1",))})
    assert [(j.item.instance_id, j.result.judge_id, j.result.scores, j.reference.scores) for j in combined] == [
        ("i1", "jury", {"fit": 2.0}, {"fit": 4.0})]


def test_the_config_declares_juries_of_its_judges(tmp_path):
    base = (f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
            "judges: [{id: a, model: smollm2}, {id: b, model: smollm2, seed: 7}]\n")
    path = tmp_path / "jury.yaml"
    path.write_text(base + "juries: [{id: panel, judges: [a, b], aggregate: median}]\n")
    config = load_config(path, catalog=CATALOG)
    assert config.juries == [JurySpec(id="panel", judges=("a", "b"), aggregate="median")]
    path.write_text(base + "juries:\n  - {id: a, judges: [a, c]}\n  - {id: solo, judges: [b, b], aggregate: vote}\n")
    with pytest.raises(UserError) as caught:
        load_config(path, catalog=CATALOG)
    message = str(caught.value)
    for expected in ("jury.yaml:8: juries.1.aggregate: Input should be 'mean', 'median' or 'majority'",):
        assert expected in message, message
    path.write_text(base + "juries:\n  - {id: a, judges: [a, c]}\n  - {id: solo, judges: [b, b]}\n")
    with pytest.raises(UserError) as caught:
        load_config(path, catalog=CATALOG)
    message = str(caught.value)
    for expected in ("jury.yaml:7: juries.0.id: 'a' is already a judge's or a jury's id",
                     "jury.yaml:7: juries.0.judges.1: 'c' is not one of the sweep's judges (its judges: a, b)",
                     "jury.yaml:8: juries.1.judges: a jury needs two or more different judges"):
        assert expected in message, message


def test_a_cell_without_juries_hashes_as_before_juries_existed():
    cell = CellSpec(study="infilling", sweep="s", model={"id": "m", "weights": "w"}, prompt_setting="L0",
                    data_path="d", data_sha256="x")
    payload = cell.model_dump(mode="json")
    del payload["versions"], payload["juries"]
    assert cell.spec_hash == stable_hash(payload)
    with_jury = cell.model_copy(update={"juries": (JurySpec(id="panel", judges=("a", "b")),)})
    assert with_jury.spec_hash != cell.spec_hash and with_jury.judge_ids == ["panel"]
