"""Annotation storage (SQLite) and agreement of human ratings with a judge."""

from __future__ import annotations

import math
import sqlite3

import pytest

from narrative_eval import annotations as ann
from narrative_eval.studies.incremental import stories
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


# --------------------------------------------------------------------------- incremental-delivery stories

QUALITY = ["craft", "structure_coherence", "originality", "genre_effectiveness", "characterization"]


def _record_id(condition, story="fantasy_001", seed=0, judge="j1"):
    return f"smollm2/{condition}/{story}/seed{seed}/{judge}"


def _story_item(kind, conditions, judges_per_output, sweep="stories", judge_scores=None):
    """A story item whose outputs are the given conditions' final stories, each with score records of its judges."""
    runs = [f"run-{c}" for c in conditions]
    return ann.AnnotationItem(
        item_id=ann.item_key(kind, sweep, "fantasy_001", 0, runs), kind=kind, study="incremental-delivery", sweep=sweep,
        instance_id="fantasy_001", seed=0, context="Write a story.\n\nRequirements:\nA mapmaker.",
        outputs=tuple(f"story {c}" for c in conditions),
        sources=tuple({"run_id": r, "model": "smollm2", "condition": c, stories.RECORDS: {j: _record_id(c, judge=j) for j in js}}
                      for r, c, js in zip(runs, conditions, judges_per_output)),
        judge_scores=tuple(judge_scores or [{} for _ in conditions]),
    )


def test_response_record_ids_pick_the_seed_of_each_judge():
    records = [{"record_id": _record_id("full", seed=seed, judge=judge), "story_id": "fantasy_001", "model": "smollm2",
                "condition": "full", "judge": judge} for seed in (0, 1) for judge in ("j1", "j2")]
    records.append({"record_id": _record_id("full", story="fantasy_002"), "story_id": "fantasy_002", "model": "smollm2",
                    "condition": "full", "judge": "j1"})
    assert stories.response_record_ids(records, "fantasy_001", 1) == {"j1": "smollm2/full/fantasy_001/seed1/j1",
                                                                  "j2": "smollm2/full/fantasy_001/seed1/j2"}
    assert stories.response_record_ids(records, "fantasy_002", 1) == {}


def test_a_story_pair_is_stored_in_canonical_order_and_exported_as_seen():
    # SHARDED was shown as A: "A slightly better" on constraints favours SHARDED (-1 for FULL), "B clearly" FULL (+2).
    seen = {"constraint_following": "A slightly better", "creative_quality": "B clearly better"}
    rating = stories.story_pairwise_rating("item", "ana", (1, 0), seen)
    assert rating.scores == {"constraint_following": -1, "creative_quality": 2}
    assert rating.preference == 2 and rating.label == "B_clearly_better"
    assert stories.seen_verdicts(rating) == ("reversed", seen)
    primary = stories.story_pairwise_rating("item", "ana", (0, 1), seen)
    assert primary.scores == {"constraint_following": 1, "creative_quality": -2}
    assert stories.seen_verdicts(primary) == ("primary", seen)


def test_story_export_writes_files_the_human_validation_loaders_read(tmp_path):
    from narrative_eval.studies.incremental.human_records import load_pair_cases, load_pairwise_verdicts, load_pointwise_ratings

    store = ann.AnnotationStore(tmp_path / "a.sqlite")
    full = _story_item("pointwise", ["full"], [["j1", "j2"]])
    sharded = _story_item("pointwise", ["sharded"], [["j1"]])
    pair = _story_item("pairwise", ["full", "sharded"], [["j1", "j2"], ["j1"]])
    elsewhere = _story_item("pointwise", ["full"], [["j1"]], sweep="another")
    fills = _item("pointwise", 0, [{}])  # an infilling item: never a story rating
    for item in (full, sharded, pair, elsewhere, fills):
        store.add_item(item)
    scores = dict(zip(QUALITY, (4, 3, 5, 2, None)))
    store.save_rating(ann.Rating(full.item_id, "ana", "pointwise", (0,), scores=scores))
    store.save_rating(ann.Rating(sharded.item_id, "ana", "pointwise", (0,), scores={**scores, "craft": 1}))
    store.save_rating(ann.Rating(full.item_id, "ben", "pointwise", (0,), scores={**scores, "characterization": 3}))
    store.save_rating(ann.Rating(elsewhere.item_id, "ana", "pointwise", (0,), scores=scores))
    store.save_rating(ann.Rating(fills.item_id, "ana", "pointwise", (0,), scores={"fluency": 3}))
    store.save_rating(stories.story_pairwise_rating(pair.item_id, "ana", (1, 0),
                                                {"constraint_following": "Tie", "creative_quality": "A clearly better"}))
    store.save_rating(stories.story_pairwise_rating(pair.item_id, "ben", (0, 1),
                                                {"constraint_following": "B slightly better", "creative_quality": "Tie"}))

    assert stories.story_judges(store, "stories") == ["j1", "j2"]
    export = stories.story_exports(store, "stories", "j1")
    assert export.left_out == 0
    paths = stories.save_story_exports(export, tmp_path / "out")
    assert sorted(p.name for p in paths.values()) == ["pair_cases.jsonl", "pairwise_verdicts.jsonl", "pointwise_ratings.jsonl"]
    known = {_record_id(c) for c in ("full", "sharded")}
    ratings = {(r.record_id, r.rater): r.scores for r in load_pointwise_ratings(paths["pointwise"], known)}
    assert ratings == {(_record_id("full"), "ana"): scores, (_record_id("sharded"), "ana"): {**scores, "craft": 1},
                       (_record_id("full"), "ben"): {**scores, "characterization": 3}}
    cases = load_pair_cases(paths["cases"], known)
    assert [(c.case_id, c.record_a, c.record_b) for c in cases] == [(pair.item_id, _record_id("full"), _record_id("sharded"))]
    verdicts = {v.rater: v for v in load_pairwise_verdicts(paths["pairwise"], {pair.item_id})}
    assert (verdicts["ana"].order, verdicts["ana"].verdicts) == (
        "reversed", {"constraint_following": "Tie", "creative_quality": "A clearly better"})
    assert verdicts["ana"].restored("creative_quality") == -2  # SHARDED, shown as A, clearly better
    assert (verdicts["ben"].order, verdicts["ben"].restored("constraint_following")) == ("primary", -1)

    # j2 scored only the FULL story: the SHARDED rating and both verdicts on the pair cannot be named by its records.
    only_full = stories.story_exports(store, "stories", "j2")
    assert only_full.left_out == 3 and not only_full.verdicts
    assert [(r.record_id, r.rater) for r in only_full.ratings] == [(_record_id("full", judge="j2"), "ana"),
                                                                  (_record_id("full", judge="j2"), "ben")]
    assert set(stories.save_story_exports(only_full, tmp_path / "out")) == {"pointwise"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["pointwise_ratings.jsonl"]  # no stale j1 verdicts


def test_agreement_keeps_to_one_study_and_leaves_out_not_applicable(tmp_path):
    store = ann.AnnotationStore(tmp_path / "a.sqlite")
    judged = {"j": dict(zip(QUALITY, (4, 3, 2, 2, 5)))}
    for index, human in enumerate([(4, 3, 2, 2, None), (4, 4, 2, 3, 5)]):
        item = _story_item("pointwise", ["full"], [["j"]], sweep=f"s{index}", judge_scores=[judged])
        store.add_item(item)
        store.save_rating(ann.Rating(item.item_id, "ana", "pointwise", (0,), scores=dict(zip(QUALITY, human))))
    fills = _item("pointwise", 0, [{"craft": 1}])  # same judge id (j) and a 'craft' score, other study
    store.add_item(fills)
    store.save_rating(ann.Rating(fills.item_id, "ana", "pointwise", (0,), scores={"craft": 5}))
    rows = {r["dimension"]: r for r in ann.pointwise_agreement(store, "j", QUALITY, study="incremental-delivery")}
    assert rows["craft"]["n"] == 2 and rows["craft"]["exact"] == 1.0 and rows["craft"]["mae"] == 0.0
    assert rows["structure_coherence"]["mae"] == pytest.approx(0.5)
    assert rows["characterization"]["n"] == 1  # the N/A rating is left out
    assert ann.pointwise_agreement(store, "j", ["craft"])[0]["n"] == 3  # without a study: both studies' items
    assert ann.judge_ids(store, "infilling") == ["j"] and len(store.items(study="incremental-delivery")) == 2
