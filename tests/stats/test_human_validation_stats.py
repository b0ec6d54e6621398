"""Human-validation statistics on small tables worked by hand (values derived in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narrative_eval.studies.incremental.human_records import EvidenceStatus, PairwiseVerdict, PointwiseRating
from narrative_eval.studies.incremental.human_stats import (
    win_rates,
    _resampled_spearman,
    agreement_row,
    human_aggregation,
    human_paired_effects,
    human_pairs,
    judges_of,
    order_consistency,
    pairwise_agreement,
    pointwise_alignment,
    pointwise_reliability,
    status_stability,
)
from narrative_eval.studies.incremental.records import ScoreRecord
from scipy import stats

DIMS = ("craft", "structure_coherence", "originality", "genre_effectiveness", "characterization")


def rating(record_id, rater, craft, characterization=None):
    """craft also fills the three other non-N/A dimensions; characterization is separate (None = N/A)."""
    scores = {d: craft for d in DIMS[:4]}
    scores["characterization"] = characterization
    return PointwiseRating(record_id, rater, scores)


def test_reliability_by_hand():
    # craft: r1 (3, 3), r2 (2, 4), r3 (5, 4). Rater pairs: |0|, |2|, |1| -> exact 1/3, mean |diff| 1.
    # Ordinal alpha: n_2=1, n_3=2, n_4=2, n_5=1 (n=6); squared ordinal distances d(2,4)=3.5^2, d(4,5)=1.5^2, ...;
    # sum o*d = 2*12.25 + 2*2.25 = 29; sum n_c*n_k*d = 198; alpha = 1 - 5*29/198 = 53/198.
    # characterization: b's r3 is N/A, so r3 is unpairable: n_2=1, n_3=2, n_4=1 (n=4), sum o*d = 18,
    # sum n_c*n_k*d = 36, alpha = 1 - 3*18/36 = -0.5; pairs |0|, |2|: exact 0.5, mean 1.
    ratings = [rating("r1", "a", 3, 3), rating("r1", "b", 3, 3), rating("r2", "a", 2, 2), rating("r2", "b", 4, 4),
               rating("r3", "a", 5, 5), rating("r3", "b", 4, None)]
    table = pointwise_reliability(ratings).set_index("dimension")
    craft = table.loc["craft"]
    assert (craft.n_responses, craft.n_ratings) == (3, 6)
    assert craft.ordinal_alpha == pytest.approx(53 / 198)
    assert craft.exact_agreement == pytest.approx(1 / 3)
    assert craft.mean_abs_disagreement == pytest.approx(1.0)
    assert craft.reason == ""
    character = table.loc["characterization"]
    assert (character.n_responses, character.n_ratings) == (3, 5)
    assert character.ordinal_alpha == pytest.approx(-0.5)
    assert (character.exact_agreement, character.mean_abs_disagreement) == (pytest.approx(0.5), pytest.approx(1.0))


def test_reliability_with_one_rater_or_no_variation_is_undefined_with_its_reason():
    alone = pointwise_reliability([rating("r1", "a", 3), rating("r2", "a", 4)]).set_index("dimension")
    assert math.isnan(alone.loc["craft", "ordinal_alpha"]) and math.isnan(alone.loc["craft", "exact_agreement"])
    assert alone.loc["craft", "reason"] == "only 1 rater(s) with valid ratings"
    assert alone.loc["characterization", "reason"] == "only 0 rater(s) with valid ratings"
    same = pointwise_reliability([rating("r1", "a", 3), rating("r1", "b", 3)]).set_index("dimension")
    assert math.isnan(same.loc["craft", "ordinal_alpha"]) and same.loc["craft", "exact_agreement"] == 1.0
    assert "no variation" in same.loc["craft", "reason"]


def record(story, condition, craft, characterization):
    quality = {d: craft for d in DIMS[:4]}
    quality["characterization"] = characterization
    return ScoreRecord(record_id=f"{story}/{condition}", story_id=story, genre="g", model="m", condition=condition,
                       judge="auto", adherence=[{"constraint_id": "c1", "score": 1.0}], quality=quality)


RECORDS = [record("s1", "full", 4, 3), record("s1", "sharded", 3, 2), record("s2", "full", 3, 4),
           record("s2", "sharded", 3, 4)]
# craft by raters a, b, c; characterization beside it (c's s2/sharded is N/A)
RATINGS = [
    rating("s1/full", "a", 4, 4), rating("s1/full", "b", 5, 2), rating("s1/full", "c", 3, 3),
    rating("s1/sharded", "a", 3, 2), rating("s1/sharded", "b", 3, 2), rating("s1/sharded", "c", 2, 1),
    rating("s2/full", "a", 2, 3), rating("s2/full", "b", 4, 3), rating("s2/full", "c", 4, 5),
    rating("s2/sharded", "a", 3, 4), rating("s2/sharded", "b", 4, 2), rating("s2/sharded", "c", 5, None),
]


def test_human_paired_effects_by_hand():
    # craft means: s1 full 4, sharded 8/3; s2 full 10/3, sharded 4 -> diffs 4/3, -2/3: delta 1/3,
    # full 11/3, sharded 10/3, one pair each way. Two pairs resampled: means in {-2/3, 1/3, 4/3}, each end
    # with probability 1/4, so the 95% interval is [-2/3, 4/3]. Automated craft diffs 1, 0 -> 0.5.
    pairs = human_pairs(RATINGS, RECORDS)
    table = human_paired_effects(pairs, n_boot=2000, seed=1).set_index("dimension")
    craft = table.loc["craft"]
    assert craft.n_pairs == 2
    assert (craft.full, craft.sharded, craft.delta) == (pytest.approx(11 / 3), pytest.approx(10 / 3), pytest.approx(1 / 3))
    assert (craft.lo, craft.hi) == (pytest.approx(-2 / 3), pytest.approx(4 / 3))
    assert (craft.n_full_better, craft.n_tied, craft.n_sharded_better) == (1, 0, 1)
    assert craft.automated_delta == pytest.approx(0.5)
    # characterization: s1 3 vs 5/3, s2 11/3 vs 3 (c's N/A left out) -> diffs 4/3, 2/3: delta 1; automated 1, 0.
    character = table.loc["characterization"]
    assert character.delta == pytest.approx(1.0) and character.n_full_better == 2
    assert character.automated_delta == pytest.approx(0.5)


def test_median_and_reviewer_centered_aggregation_by_hand():
    # characterization medians: s1 3 vs 2, s2 3 vs 3 -> diffs 1, 0: 0.5.
    # Reviewer means (characterization): a 13/4, b 9/4, c 3. Centered responses: s1 full 1/6, s1 sharded -7/6,
    # s2 full 5/6, s2 sharded (0.75 - 0.25)/2 = 1/4 -> diffs 4/3, 7/12: mean 23/24.
    by = {how: human_pairs(RATINGS, RECORDS, aggregation=how) for how in ("median", "centered")}
    table = human_aggregation(by, n_boot=500, seed=0).set_index("dimension")
    assert table.loc["characterization", "median_delta"] == pytest.approx(0.5)
    assert table.loc["characterization", "centered_delta"] == pytest.approx(23 / 24)
    # craft: every rater rated every response, so centering changes nothing: 1/3 as in the mean table.
    assert table.loc["craft", "centered_delta"] == pytest.approx(1 / 3)
    # craft medians: s1 4 vs 3, s2 4 vs 4 -> 0.5
    assert table.loc["craft", "median_delta"] == pytest.approx(0.5)


def test_alignment_by_hand():
    # craft, per response (s1f, s1s, s2f, s2s): human means 4, 8/3, 10/3, 4 -> mid-ranks 3.5, 1, 2, 3.5;
    # automated 4, 3, 3, 3 -> ranks 4, 2, 2, 2. Deviations (1, -1.5, -0.5, 1) and (1.5, -0.5, -0.5, -0.5):
    # rho = 2 / sqrt(4.5 * 3) = 0.5443; MAE = (0 + 1/3 + 1/3 + 1) / 4 = 5/12.
    table = pointwise_alignment(human_pairs(RATINGS, RECORDS), n_boot=300, seed=0).set_index("dimension")
    craft = table.loc["craft"]
    assert (craft.n_pairs, craft.n_responses) == (2, 4)
    assert craft.spearman == pytest.approx(2 / math.sqrt(13.5))
    assert craft.mae == pytest.approx(5 / 12)
    assert -1 <= craft.lo <= craft.hi <= 1


def test_resampled_spearman_equals_spearman_on_the_repeated_rows():
    x = np.array([1.0, 2.0, 2.0, 5.0, 3.0])
    y = np.array([2.0, 1.0, 4.0, 4.0, 3.0])
    weights = np.array([[2, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 3, 0, 1, 1], [5, 0, 0, 0, 0]])
    got = _resampled_spearman(x, y, weights)
    for b, counts in enumerate(weights[:3]):
        picks = np.repeat(np.arange(5), counts)
        assert got[b] == pytest.approx(stats.spearmanr(x[picks], y[picks]).statistic)
    assert math.isnan(got[3])  # one response drawn five times: constant, no rho


def verdict(case, rater, order, constraint, quality="Tie"):
    return PairwiseVerdict(case, rater, order, {"constraint_following": constraint, "creative_quality": quality})


# Human h sees each case once (c5 reversed); judge j sees every case in both orders.
VERDICTS = [
    verdict("c1", "h", "primary", "A clearly better"), verdict("c2", "h", "primary", "Tie"),
    verdict("c3", "h", "primary", "B clearly better"), verdict("c4", "h", "primary", "B slightly better"),
    verdict("c5", "h", "reversed", "A slightly better"),
    verdict("c1", "j", "primary", "A slightly better"), verdict("c1", "j", "reversed", "B slightly better"),
    verdict("c2", "j", "primary", "B slightly better"), verdict("c2", "j", "reversed", "B clearly better"),
    verdict("c3", "j", "primary", "A slightly better"), verdict("c3", "j", "reversed", "Tie"),
    verdict("c4", "j", "primary", "B slightly better"), verdict("c4", "j", "reversed", "A clearly better"),
    verdict("c5", "j", "primary", "B clearly better"), verdict("c5", "j", "reversed", "A slightly better"),
]


def test_pairwise_agreement_by_hand():
    # h (primary orientation; c5 restored from +1 to -1) = 2, 0, -2, -1, -1; j primary = 1, -1, 1, -1, -2.
    # Directions agree on c1, c4, c5: 3/5. Exact: c4 only: 1/5. |diff| 1, 1, 3, 0, 1: mean 6/5, severe 1/5.
    # QWK: observed mean squared diff 12/5; expected over all 25 (h, j) pairs 82/25 -> 1 - 2.4/3.28 = 11/41.
    # Collapsed: p_o = 3/5, p_e = (1*2 + 1*0 + 3*3)/25 = 11/25 -> (0.6 - 0.44)/0.56 = 2/7.
    table = pairwise_agreement(VERDICTS, "h").set_index("dimension")
    row = table.loc["constraint_following"]
    assert (row.judge, row.n) == ("j", 5)
    assert row.directional_agreement == pytest.approx(0.6)
    assert row.exact_agreement == pytest.approx(0.2)
    assert row.mean_abs_disagreement == pytest.approx(1.2)
    assert row.severe_disagreement_rate == pytest.approx(0.2)
    assert row.qwk == pytest.approx(11 / 41)
    assert row.collapsed_kappa == pytest.approx(2 / 7)
    # creative quality: every verdict a tie: full agreement, kappas undefined (chance agreement total) with the reason.
    quality = table.loc["creative_quality"]
    assert quality.directional_agreement == 1.0 and math.isnan(quality.qwk) and math.isnan(quality.collapsed_kappa)
    assert "qwk undefined" in quality.reason and "collapsed_kappa undefined" in quality.reason


def test_win_rates_by_hand_with_both_sides_lengths():
    # j, constraint following, order-restored primary/reversed: c1 +1/+1 -> 1; c2 -1/+2 -> 0.5; c3 +1/0 -> 0.75;
    # c4 -1/-2 -> 0; c5 -2/-1 -> 0: 2.25/5 = 0.45. h saw each case once: c1 1, c2 0.5, c3 0, c4 0, c5 (-1) 0: 0.3.
    # Creative quality: ties only: 0.5. Equal lengths leave nothing for the length term: LC = raw.
    words = {case: (100, 100) for case in ("c1", "c2", "c3", "c4", "c5")}
    table = win_rates(VERDICTS, words, n_boot=200).set_index(["judge", "dimension"])
    assert table.loc[("j", "constraint_following"), "win_rate"] == pytest.approx(0.45)
    assert table.loc[("h", "constraint_following"), "win_rate"] == pytest.approx(0.3)
    assert table.loc[("j", "creative_quality"), "win_rate"] == pytest.approx(0.5)
    row = table.loc[("j", "constraint_following")]
    assert row.lc_win_rate == pytest.approx(0.45, abs=1e-3) and row.lc_win_rate_lo <= row.lc_win_rate <= row.lc_win_rate_hi
    assert (row.n, row.full_mean_words, row.sharded_mean_words) == (5, 100.0, 100.0)
    # The lengths read are the pairs': FULL 50 words longer on every case.
    longer = win_rates(VERDICTS, {case: (150, 100) for case in words}, n_boot=50).set_index(["judge", "dimension"])
    assert longer.loc[("j", "constraint_following"), "full_mean_words"] - longer.loc[
        ("j", "constraint_following"), "sharded_mean_words"] == 50.0


def test_order_consistency_by_hand():
    # j: primary +1/-1/+1/-1/-2, reversed restored +1/+2/0/-2/-1: same direction on c1, c4, c5 (c2 flips,
    # c3 becomes a tie): 3 of 5. Creative quality: ties in both orders: 5 of 5. h saw each case once: no row.
    table = order_consistency(VERDICTS).set_index("dimension")
    assert list(table["judge"]) == ["j", "j"]
    assert (table.loc["constraint_following", "n"], table.loc["constraint_following", "n_consistent"]) == (5, 3)
    assert table.loc["constraint_following", "order_restored_consistency"] == pytest.approx(0.6)
    assert table.loc["creative_quality", "order_restored_consistency"] == 1.0


def test_judges_and_empty_agreement():
    assert judges_of(VERDICTS) == {"j"}
    assert judges_of(VERDICTS, {"h"}) == {"h", "j"}
    empty = agreement_row([], [])
    assert empty["n"] == 0 and math.isnan(empty["qwk"]) and empty["reason"] == "no case judged by both"
    apart = pairwise_agreement([verdict("c1", "h", "primary", "Tie"), verdict("c2", "j", "primary", "Tie")], "h")
    assert list(apart["n"]) == [0, 0] and set(apart["reason"]) == {"no case judged by both"}


def test_status_stability_by_hand():
    # Judge e, case c1: response r1 (FULL) shown as A in the primary order and as B in the reversed one, r2 the other
    # way round. r1: k1 satisfied/satisfied (stable), k2 partial/missing (not); r2: k1 missing/missing (stable),
    # k2 satisfied/partial (not). Case c2: r3/k1 only in the primary order (not counted). 2 of 4 stable.
    # Judge f gave statuses in one order only: no item, undefined with its reason.
    def status(case, rater, order, shown_as, record, item, value):
        return EvidenceStatus(case, rater, order, shown_as, record, item, value, "")

    evidence = [
        status("c1", "e", "primary", "A", "r1", "k1", "satisfied"), status("c1", "e", "reversed", "B", "r1", "k1", "satisfied"),
        status("c1", "e", "primary", "A", "r1", "k2", "partial"), status("c1", "e", "reversed", "B", "r1", "k2", "missing"),
        status("c1", "e", "primary", "B", "r2", "k1", "missing"), status("c1", "e", "reversed", "A", "r2", "k1", "missing"),
        status("c1", "e", "primary", "B", "r2", "k2", "satisfied"), status("c1", "e", "reversed", "A", "r2", "k2", "partial"),
        status("c2", "e", "primary", "A", "r3", "k1", "satisfied"),
        status("c1", "f", "primary", "A", "r1", "k1", "satisfied"),
    ]
    table = status_stability(evidence).set_index("judge")
    assert list(table.columns) == ["n_items", "n_stable", "status_stability", "reason"]
    assert (table.loc["e", "n_items"], table.loc["e", "n_stable"]) == (4, 2)
    assert table.loc["e", "status_stability"] == pytest.approx(0.5) and table.loc["e", "reason"] == ""
    assert table.loc["f", "n_items"] == 0 and math.isnan(table.loc["f", "status_stability"])
    assert table.loc["f", "reason"] == "no requirement with a status in both orders"
