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
from narrative_eval.judges.judge import MAJORITY_VERSION, combine_repeats, combine_scores, majority_verdict
from narrative_eval.judges.jury import jury_controls, jury_verdict, quorum
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
    # fit: two members said 4; flow: no two agree, so all three are the most frequent: their median is it.
    assert found["majority"] == {"fit": 4.0, "flow": 3.0}


def test_a_tied_majority_is_settled_toward_the_weaker_claim_by_every_majority():
    """One rule for a majority of whole verdicts, ties included: the median verdict, an even split toward zero (not
    met, no preference, the lower score); a member's mean of repeats is read as a whole verdict by the same rule. A
    sweep's jury, a table's jury and a pairwise judge's repeats follow it alike."""
    cases = [([1.0, 0.0], 0.0), ([1.0, 1.0, 0.0, 0.0], 0.0), ([1.0, 1.0, 0.0], 1.0),  # a 0/1 checklist requirement
             ([1.0, -1.0], 0.0), ([2.0, 1.0], 1.0), ([-2.0, -1.0], -1.0), ([-1.0, 1.0, 2.0], 1.0),  # pairwise
             ([-2.0, -2.0, 1.0, 1.0, 2.0], 1.0),
             ([3.0, 4.0], 3.0), ([1.0, 5.0], 3.0), ([2.0, 4.0, 5.0], 4.0), ([1.0, 2.0, 5.0], 2.0),  # scores
             ([3.5, 4.0, 3.0], 3.0)]
    for values, expected in cases:
        assert majority_verdict(values) == expected, values
    members = ("a", "b", "c", "d", "e")
    table = pd.DataFrame([values + [float("nan")] * (len(members) - len(values)) for values, _ in cases],
                         columns=list(members))
    assert jury_scores(table, "majority")[0].tolist() == [expected for _, expected in cases]
    for values, expected in cases:
        jury = JurySpec(id="jury", judges=members[:len(values)], aggregate="majority")
        assert jury_verdict(jury, {m: verdict(m, fit=v) for m, v in zip(members, values)}).scores == {"fit": expected}
        repeats = [verdict("j", fit=v) for v in values]
        assert combine_repeats(repeats, pairwise=True).scores == {"fit": expected}


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
    for expected in ("jury.yaml:8: juries.1.aggregate: Input should be 'mean', 'median', 'majority' or 'weighted'",):
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


def test_a_weighted_jury_is_no_cells_and_needs_the_control_checks(tmp_path):
    """A weighted jury's weights come from its members' control checks, which run after the cells: it leaves every
    cell (and its spec hash) as the sweep without it has them, and a sweep without checks cannot have one."""
    from narrative_eval.sweep import expand_grid

    base = (f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
            "judges: [{id: a, model: smollm2}, {id: b, model: smollm2, seed: 7}]\n")
    path = tmp_path / "weighted.yaml"
    path.write_text(base)
    alone = expand_grid(load_config(path, catalog=CATALOG))
    path.write_text(base + "juries: [{id: panel, judges: [a, b], aggregate: weighted}]\n")
    config = load_config(path, catalog=CATALOG)
    assert config.juries[0].after_checks and not JurySpec(id="p", judges=("a", "b")).after_checks
    assert [cell.spec_hash for cell in expand_grid(config)] == [cell.spec_hash for cell in alone]
    path.write_text(base + "judge_checks: false\njuries: [{id: panel, judges: [a, b], aggregate: weighted}]\n")
    with pytest.raises(UserError, match=r"weighted.yaml:\d+: juries.0.aggregate: a weighted jury's weights come from "
                                        r"its members' control checks: turn judge_checks on"):
        load_config(path, catalog=CATALOG)


def test_a_majority_jury_marks_its_cells_with_the_rules_version(tmp_path):
    """The majority rule changed (equally frequent scores once gave their mean): a cell whose jury combines by majority
    holds the rule's version in its spec, so a cell finished under the first rule is made again, not skipped; a jury
    by mean or median leaves the versions as they were."""
    from narrative_eval.sweep import expand_grid

    base = (f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
            "judges: [{id: a, model: smollm2}, {id: b, model: smollm2, seed: 7}]\n")
    path = tmp_path / "majority.yaml"
    path.write_text(base + "juries: [{id: panel, judges: [a, b], aggregate: majority}]\n")
    [cell, *_] = expand_grid(load_config(path, catalog=CATALOG))
    assert cell.versions == {"jury/majority": f"version {MAJORITY_VERSION}"} and MAJORITY_VERSION == 2
    first_rule = cell.model_copy(update={"versions": {}})
    assert cell.spec_hash != first_rule.spec_hash
    path.write_text(base + "juries: [{id: panel, judges: [a, b], aggregate: median}]\n")
    assert all(cell.versions == {} for cell in expand_grid(load_config(path, catalog=CATALOG)))


def test_a_weighted_jury_listens_to_the_members_that_discriminate_and_combines_their_logged_scores(tmp_path):
    """Weights from the members' discrimination checks (the mean of their checks; none at chance), then the report's
    table: each output's members' scores weighted, a member that failed on an output left out there."""
    from narrative_eval.reports.juries import weighted_jury_frame, write_weighted_juries
    from narrative_eval.stats.judge_checks import CheckRow
    from narrative_eval.stats.judge_reliability import jury_weights

    def row(judge: str, check: str, value: float, statistic: str = "discrimination") -> CheckRow:
        return CheckRow(judge, "r", check, statistic, 10, 0, value, value, value, 0.8, value >= 0.8, 0.0, 0.0, 0.0, "")

    rows = [row("a", "mismatched_fill", 1.0), row("a", "degenerate_fill", 0.8), row("b", "mismatched_fill", 0.5),
            row("b", "refusal", 0.0, "adherence"), row("c", "mismatched_fill", 0.7)]
    found = jury_weights("panel", ("a", "b", "c"), rows)
    # a: 2 x (0.9 - 0.5) = 0.8; b at chance: 0; c: 2 x (0.7 - 0.5) = 0.4; normalised to sum to 1.
    assert found["discrimination"] == pytest.approx({"a": 0.9, "b": 0.5, "c": 0.7})
    assert found["weights"] == pytest.approx({"a": 2 / 3, "b": 0.0, "c": 1 / 3}) and found["error"] == ""
    chance = jury_weights("coin", ("b", "d"), rows)
    assert chance["weights"] is None and "no jury member discriminates above chance" in chance["error"]

    scores = pd.DataFrame({"model": ["m", "m", "m"], "setting": ["L1", "L1", "L2"],
                           "judge/a/fit": [5.0, 2.0, None], "judge/b/fit": [1.0, 1.0, 1.0], "judge/c/fit": [2.0, 5.0, 4.0],
                           "judge/a/qavg": [5.0, 2.0, None], "judge/b/qavg": [1.0, 1.0, 1.0], "judge/c/qavg": [2.0, 5.0, 4.0],
                           "judge/a/status": ["ok", "ok", "failed"], "judge/b/repeat_means": [[1, 1]] * 3})
    table = weighted_jury_frame(scores, [found, chance], ("model", "setting"))
    fit = table[(table["jury"] == "panel") & (table["dimension"] == "fit")].set_index("setting")
    assert list(table[table["jury"] == "panel"]["dimension"].unique()) == ["fit", "qavg"]
    # L1: (2/3 x 5 + 1/3 x 2) = 4 and (2/3 x 2 + 1/3 x 5) = 3; L2: a failed, so c alone (b weighs nothing): 4.
    assert fit.loc["L1", "score"] == pytest.approx(3.5) and fit.loc["L1", "n"] == 2
    assert fit.loc["L2", "score"] == pytest.approx(4.0) and fit.loc["L2", "weights"] == "a 0.667, b 0.000, c 0.333"
    [coin] = table[table["jury"] == "coin"].to_dict("records")
    assert "no jury member discriminates above chance" in coin["weights"] and pd.isna(coin["score"])
    assert list(write_weighted_juries(scores, [found], ("model", "setting"), tmp_path)) == [
        "Weighted juries: each jury's mean score per group, its members weighted by their control checks"]
    assert (tmp_path / "weighted_juries.csv").is_file()
    assert write_weighted_juries(scores, [], ("model", "setting"), tmp_path / "none") == {}


def test_a_weighted_jury_is_weighed_by_its_members_agreement_with_people_where_they_rated():
    """The report, once people rated the sweep's outputs, scales each rated member's weight by its agreement with them
    (its human_rho): a member that discriminates as well as another but disagrees with people weighs nothing."""
    from narrative_eval.reports.juries import weighed_with_people, weighted_jury_frame

    logged = {"jury": "panel", "members": ["a", "b"], "discrimination": {"a": 0.9, "b": 0.9},
              "weights": {"a": 0.5, "b": 0.5}, "error": ""}
    [found] = weighed_with_people([logged], {"a": 0.6, "b": -0.2, "other": 0.9})
    assert found["weights"] == pytest.approx({"a": 1.0, "b": 0.0}) and found["human_agreement"] == {"a": 0.6, "b": -0.2}
    assert weighed_with_people([logged], {"other": 0.9}) == [logged]  # nobody of the jury rated: as the sweep logged it
    [nobody] = weighed_with_people([logged], {"a": 0.0, "b": -0.1})
    assert nobody["weights"] is None and "agrees with people" in nobody["error"]
    scores = pd.DataFrame({"model": ["m", "m"], "setting": ["L1", "L1"],
                           "judge/a/fit": [5.0, 3.0], "judge/b/fit": [1.0, 1.0]})
    [row] = weighted_jury_frame(scores, [found], ("model", "setting")).to_dict("records")
    assert row["score"] == pytest.approx(4.0) and row["weights"] == "a 1.000, b 0.000 (control checks x agreement with people)"
