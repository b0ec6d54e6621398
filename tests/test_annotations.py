"""Annotation storage (SQLite) and agreement of human ratings with a judge."""

from __future__ import annotations

import math
import sqlite3

import pytest

from narrative_eval import annotations as ann
from narrative_eval.judges.agreement import cohen_kappa

DIMS = ["fluency", "faithfulness", "coherence", "consistency", "informativeness"]


def _item(kind, index, judge_scores):
    runs = ["run-a", "run-b"] if kind == "pairwise" else ["run-a"]
    return ann.AnnotationItem(
        item_id=ann.item_key(kind, "sw", f"inst{index}", 0, runs), kind=kind, study="infilling", sweep="sw",
        instance_id=f"inst{index}", seed=0, context="Before. ______ After.",
        outputs=tuple(f"fill {r} {index}" for r in runs),
        sources=tuple({"run_id": r, "model": f"model-{r}", "prompt_setting": "L2", "condition": "standard"} for r in runs),
        judge_scores=tuple({"j": scores} for scores in judge_scores),
    )


def test_item_key_ignores_run_order():
    assert ann.item_key("pairwise", "s", "i", 0, ["b", "a"]) == ann.item_key("pairwise", "s", "i", 0, ["a", "b"])
    assert ann.item_key("pairwise", "s", "i", 0, ["a", "b"]) != ann.item_key("pairwise", "s", "i", 1, ["a", "b"])


def test_ratings_survive_a_new_store_and_replace_per_rater(tmp_path):
    path = tmp_path / "ratings.sqlite"
    store = ann.AnnotationStore(path)
    item = _item("pairwise", 0, [{d: 4 for d in DIMS}, {d: 2 for d in DIMS}])
    store.add_item(item)
    store.save_rating(ann.Rating(item.item_id, "ana", "pairwise", (1, 0), preference=ann.canonical_preference(2, (1, 0)),
                                 label="A_clearly_better"))
    store.save_rating(ann.Rating(item.item_id, "ana", "pairwise", (0, 1), preference=1, label="A_slightly_better"))
    store.save_rating(ann.Rating(item.item_id, "ben", "pairwise", (0, 1), preference=-1, label="B_slightly_better"))

    reopened = ann.AnnotationStore(path)
    by_rater = {r.rater: r for r in reopened.ratings(kind="pairwise")}
    assert set(by_rater) == {"ana", "ben"}
    assert by_rater["ana"].preference == 1 and by_rater["ana"].label == "A_slightly_better"
    assert reopened.counts() == {"ana": {"pairwise": 1}, "ben": {"pairwise": 1}}
    assert reopened.item(item.item_id).sources[1]["model"] == "model-run-b"
    # The file is plain SQLite, readable by any tool.
    with sqlite3.connect(path) as db:
        assert db.execute("select count(*) from ratings").fetchone()[0] == 2


def test_canonical_preference_undoes_the_shown_order():
    assert ann.canonical_preference(2, (0, 1)) == 2
    assert ann.canonical_preference(2, (1, 0)) == -2
    assert ann.canonical_preference(0, (1, 0)) == 0


def test_invalid_ratings_are_refused(tmp_path):
    store = ann.AnnotationStore(tmp_path / "r.sqlite")
    item = _item("pairwise", 0, [{}, {}])
    store.add_item(item)
    with pytest.raises(ValueError):
        store.save_rating(ann.Rating(item.item_id, "ana", "pairwise", (0, 1), preference=5))
    with pytest.raises(KeyError):
        store.save_rating(ann.Rating("missing", "ana", "pairwise", (0, 1), preference=1))


def test_pointwise_agreement_matches_the_agreement_functions(tmp_path):
    store = ann.AnnotationStore(tmp_path / "r.sqlite")
    judge = [3, 4, 2, 5, 1, 3]
    human = [3, 5, 2, 4, 1, 3]
    for index, (j, h) in enumerate(zip(judge, human)):
        item = _item("pointwise", index, [{d: j for d in DIMS}])
        store.add_item(item)
        store.save_rating(ann.Rating(item.item_id, "ana", "pointwise", (0,), scores={d: h for d in DIMS}))
    rows = {row["dimension"]: row for row in ann.pointwise_agreement(store, "j", DIMS)}
    fluency = rows["fluency"]
    assert fluency["n"] == 6
    assert fluency["mae"] == pytest.approx(sum(abs(a - b) for a, b in zip(human, judge)) / 6)
    assert fluency["exact"] == pytest.approx(4 / 6)
    assert fluency["kappa_quadratic"] == pytest.approx(cohen_kappa(human, judge, weights="quadratic", labels=[1, 2, 3, 4, 5]))
    assert 0.5 < fluency["spearman"] <= 1.0


def test_pairwise_agreement_uses_the_judges_score_difference(tmp_path):
    store = ann.AnnotationStore(tmp_path / "r.sqlite")
    # Judge prefers output 0 in items 0 and 1, output 1 in item 2, ties in item 3.
    judged = [([4, 2], 2), ([5, 3], 1), ([2, 4], 1), ([3, 3], 0)]
    for index, ((first, second), human) in enumerate(judged):
        item = _item("pairwise", index, [{d: first for d in DIMS}, {d: second for d in DIMS}])
        store.add_item(item)
        store.save_rating(ann.Rating(item.item_id, "ana", "pairwise", (0, 1), preference=human))
    result = ann.pairwise_agreement(store, "j", DIMS)
    assert result["n"] == 4
    assert result["exact"] == pytest.approx(3 / 4)  # items 0, 1 and the tie 3 agree; item 2 does not
    assert result["n_decided"] == 3
    assert result["same_winner_share"] == pytest.approx(2 / 3)
    assert ann.judge_ids(store) == ["j"]


def test_rater_agreement_needs_two_raters(tmp_path):
    store = ann.AnnotationStore(tmp_path / "r.sqlite")
    for index in range(4):
        item = _item("pointwise", index, [{}])
        store.add_item(item)
        for rater in ("ana", "ben"):
            store.save_rating(ann.Rating(item.item_id, rater, "pointwise", (0,), scores={"fluency": index + 1}))
    (row,) = ann.rater_agreement(store, ["fluency"])
    assert row["raters"] == 2 and row["items_rated_twice"] == 4
    assert row["alpha"] == pytest.approx(1.0)
    empty = ann.AnnotationStore(tmp_path / "empty.sqlite")
    assert math.isnan(ann.rater_agreement(empty, ["fluency"])[0]["alpha"])


def test_sweep_ratings_locate_each_rated_output(tmp_path):
    store = ann.AnnotationStore(tmp_path / "a.sqlite")
    item = _item("pointwise", 1, [{"fluency": 4.0}])
    store.add_item(item)
    store.save_rating(ann.Rating(item.item_id, "ann", "pointwise", (0,), scores={"fluency": 5, "coherence": 3}))
    other = ann.AnnotationItem(**{**item.__dict__, "item_id": "x", "sweep": "another"})
    store.add_item(other)
    store.save_rating(ann.Rating("x", "ann", "pointwise", (0,), scores={"fluency": 1}))
    assert ann.sweep_ratings(store, "sw") == [
        {"rater": "ann", "model": "model-run-a", "prompt_setting": "L2", "instance_id": "inst1", "seed": 0,
         "fluency": 5, "coherence": 3}
    ]


def test_ratings_csv_reports_every_bad_row_with_its_line(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("rater,model,prompt_setting,instance_id,fluency,coherence\nann,m,L2,i1,4,\nbob,m,L2,i1,5,2\n")
    rows = ann.read_ratings_csv(good, DIMS)
    assert rows[0] == {"rater": "ann", "model": "m", "prompt_setting": "L2", "instance_id": "i1", "seed": 0, "fluency": 4.0}
    assert rows[1]["coherence"] == 2.0
    bad = tmp_path / "bad.csv"
    bad.write_text("rater,model,prompt_setting,instance_id,seed,fluency\nann,m,L2,i1,0,4\n,m,L2,i2,0,6\nann,m,L2,i3,x,3\n")
    with pytest.raises(ValueError) as error:
        ann.read_ratings_csv(bad, DIMS)
    message = str(error.value)
    assert f"{bad}:3: empty rater; fluency = '6' is not a score in 1-5" in message
    assert f"{bad}:4: seed 'x' is not an integer" in message
    no_keys = tmp_path / "nokeys.csv"
    no_keys.write_text("rater,fluency\nann,4\n")
    with pytest.raises(ValueError, match=r"nokeys.csv:1: missing column\(s\) model, prompt_setting, instance_id"):
        ann.read_ratings_csv(no_keys, DIMS)
