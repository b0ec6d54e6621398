"""Judge control checks end to end: control items judged through registered backends behind the request cache,
their statistics and verdicts against the shipped thresholds, and the judge_checks table; once with the embedded
SmolLM2 judge on infilling controls."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import binomtest

from narrative_eval.backends import backend
from narrative_eval.data.instances import sentences
from narrative_eval.judges.checks import ControlItem, judge_controls, load_thresholds, sample_ids, shuffled_sentences
from narrative_eval.records import Reply
from narrative_eval.reports.judge_checks import failed_checks, write_judge_checks
from narrative_eval.stats.judge_checks import COLUMNS, check_rows, judge_checks_table, wilson_interval
from narrative_eval.studies.incremental.controls import incremental_controls, refusal_text
from narrative_eval.studies.incremental.vocabulary import PAIRWISE_EVIDENCE_RUBRIC, PAIRWISE_RUBRIC
from narrative_eval.studies.infilling.controls import infilling_controls

from tests.control_judges import STORIES, OracleJudge, control_judge, shipped_instances, shipped_tasks

K = 6


@pytest.fixture(scope="module")
def instances():
    return shipped_instances()


@pytest.fixture(scope="module")
def tasks():
    return shipped_tasks()


@pytest.fixture(scope="module")
def items(instances, tasks):
    """Every kind of control: infilling fills, checklist, quality, and both pairwise rubrics."""
    return infilling_controls(instances, K) + incremental_controls(
        tasks, STORIES, K, pairwise_rubrics=(PAIRWISE_RUBRIC, PAIRWISE_EVIDENCE_RUBRIC))


def good_texts(instances, tasks) -> list[tuple[str, str]]:
    """What the oracle knows to be good: each gold fill with its passage, each story with its brief."""
    briefs = {task.story_id: task.full_instruction for task in tasks}
    return ([(i.problem, i.gold_answer) for i in instances]
            + [(briefs[story_id], story) for story_id, story in STORIES.items()])


def rows_of(kind, items, instances, tasks, tmp_path):
    cached, judge = control_judge(kind, good_texts(instances, tasks), refusal_text(), tmp_path)
    judgments = judge_controls(cached, judge, items)
    return judgments, check_rows(judge.id, judgments), (cached, judge)


def by_check(rows):
    return {(row.rubric, row.check): row for row in rows}


def test_a_judge_right_by_construction_passes_every_check(items, instances, tasks, tmp_path):
    judgments, rows, (cached, judge) = rows_of("control-oracle", items, instances, tasks, tmp_path)
    assert all(j.ok for j in judgments)
    checks = by_check(rows)
    # Every rubric x check the items name has a row, and each pairwise rubric a position-bias row.
    assert set(checks) == {(i.rubric, i.check) for i in items} | {
        (PAIRWISE_RUBRIC, "position_bias"), (PAIRWISE_EVIDENCE_RUBRIC, "position_bias")}
    failed = [row for row in rows if not row.passed]
    assert not failed, failed_checks(failed)
    for row in rows:
        if row.statistic == "discrimination":
            assert row.value == 1.0 and row.lo > 0.5 and row.gap > 0 and row.gap_lo <= row.gap <= row.gap_hi
        if row.statistic == "adherence":
            assert row.value == 0.0
        if row.statistic == "position_bias":
            assert row.value == 0.5  # the refusal pairs in both orders; identical pairs tie
        if row.statistic == "tie_rate":
            assert row.value == 1.0
        if row.statistic == "length_bias":
            assert row.value == 0.0 and row.gap < 0  # the padded copy is never the good text
    # A second run of the same checks asks the engine nothing: every request comes from the cache.
    generated = cached.generated
    rows_again = check_rows(judge.id, judge_controls(cached, judge, items))
    assert cached.generated == generated and [r.value for r in rows_again] == [r.value for r in rows]


def test_a_judge_that_always_gives_the_same_score_fails_discrimination(items, instances, tasks, tmp_path):
    _, rows, _ = rows_of("control-constant", items, instances, tasks, tmp_path)
    discrimination = [row for row in rows if row.statistic == "discrimination"]
    assert discrimination and all(not row.passed for row in discrimination)
    assert all(row.value == 0.5 and row.gap == 0 and "below 0.8" in row.note for row in discrimination)
    # It ties identical pairs as it ties everything, and gives a refusal half of every requirement.
    checks = by_check(rows)
    assert checks[(PAIRWISE_RUBRIC, "identical_pair")].passed
    assert not checks[("creative_checklist", "refusal")].passed


def test_a_judge_that_always_prefers_a_fails_position_bias(items, instances, tasks, tmp_path):
    _, rows, _ = rows_of("control-always-a", items, instances, tasks, tmp_path)
    checks = by_check(rows)
    for rubric in (PAIRWISE_RUBRIC, PAIRWISE_EVIDENCE_RUBRIC):
        bias = checks[(rubric, "position_bias")]
        assert bias.value == 1.0 and not bias.passed and "prefers A" in bias.note
        assert not checks[(rubric, "identical_pair")].passed
        assert not checks[(rubric, "refusal_pair")].passed  # wins as A, loses as B: a tie over both orders
    # Its single-item verdicts are the oracle's: those checks pass.
    assert all(row.passed for row in rows if row.rubric not in (PAIRWISE_RUBRIC, PAIRWISE_EVIDENCE_RUBRIC))


@backend("control-unparseable")
class UnparseableWhereTold(OracleJudge):
    """The oracle, except that a request whose user message holds one of options['garble'] gets prose, not JSON."""

    def generate(self, conversations, params):
        replies = super().generate(conversations, params)
        garble = self.spec.options.get("garble", [])
        return [Reply(text="I think it is quite good.") if any(g in c[-1].content for g in garble) else reply
                for c, reply in zip(conversations, replies, strict=True)]


def test_replies_that_never_parse_are_retried_then_recorded_as_failed(instances, tmp_path):
    fills = infilling_controls(instances, K)
    mismatched = [item for item in fills if item.check == "mismatched_fill"]
    # Half the mismatched fills get prose: over the failure share, that check fails whatever its value.
    garbled = [item.inputs["candidate"] for item in mismatched[: len(mismatched) // 2]]
    cached, judge = control_judge("control-unparseable", [(i.problem, i.gold_answer) for i in instances], "", tmp_path,
                                  garble=garbled)
    judgments = judge_controls(cached, judge, fills)

    def shown(inputs) -> bool:
        return inputs is not None and any(g in inputs["problem"] + inputs["candidate"] for g in garbled)

    failed = [j for j in judgments if not j.ok]
    assert failed == [j for j in judgments if shown(j.item.inputs) or shown(j.item.reference)]
    assert all(j.result.attempts == judge.max_retries + 1 and j.result.raw_replies for j in failed)
    assert all("no JSON object" in (j.result.error or j.reference.error) for j in failed)
    rows = by_check(check_rows(judge.id, judgments))
    row = rows[("infilling_narrative", "mismatched_fill")]
    n_failed = sum(j.item.check == "mismatched_fill" for j in failed)
    assert row.n_failed == n_failed >= len(garbled) and row.n == len(mismatched) - n_failed
    assert not row.passed and "never validated" in row.note


def test_a_reference_serving_several_checks_is_judged_once(instances, tmp_path):
    fills = infilling_controls(instances, K)
    cached, judge = control_judge("control-oracle", [(i.problem, i.gold_answer) for i in instances], "", None)
    judge_controls(cached, judge, fills)
    distinct = {item.inputs["candidate"] for item in fills} | {item.reference["candidate"] for item in fills}
    assert cached.generated == len(distinct) < 2 * len(fills)


def test_pairwise_relations_need_a_pairwise_rubric():
    cached, judge = control_judge("control-oracle")
    item = ControlItem("infilling_narrative", "bad", "x", {"problem": "a ______ b", "candidate": "c"}, "tie")
    with pytest.raises(ValueError, match="pairwise"):
        judge_controls(cached, judge, [item])
    with pytest.raises(ValueError, match="reference"):
        ControlItem("infilling_narrative", "bad", "x", {"problem": "a ______ b", "candidate": "c"}, "below_reference")


def test_wilson_interval_matches_scipy():
    for successes, n in ((20, 20), (16, 20), (4, 5), (0, 7), (13, 40)):
        expected = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(successes, n) == pytest.approx((expected.low, expected.high))
    low, high = wilson_interval(16.5, 20)  # a tie counts half: between 16 and 17 wins
    assert wilson_interval(16, 20)[0] < low < wilson_interval(17, 20)[0]
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_instances_are_chosen_alike_for_every_judge_and_stay_chosen_as_data_grows(instances):
    ids = [i.instance_id for i in instances]
    chosen = sample_ids(ids, 20)
    assert len(chosen) == 20 and chosen == sample_ids(ids, 20) and set(chosen) == set(sample_ids(ids[::-1], 20))
    assert chosen == [i for i in ids if i in set(chosen)]  # in the data's order
    earlier = sample_ids(ids[:150], 20)
    # Growing the data only swaps in ids that hash lower: what is still chosen was chosen before.
    assert set(chosen) & set(ids[:150]) <= set(earlier)
    assert sample_ids(ids[:5], 20) == ids[:5] and sample_ids(ids, None) == ids


def test_a_shuffled_text_keeps_every_sentence_in_an_order_seeded_by_seed_and_key():
    story = STORIES["mystery_003"]

    def order(seed: int, key: str) -> list[int]:
        return [sentences(story).index(part) for part in sentences(shuffled_sentences(story, seed, key))]

    # The orders the incremental controls have always shown: the same texts, so their verdicts come from the cache.
    assert (order(0, "mystery_003"), order(1, "mystery_003")) == ([3, 2, 0, 4, 1], [2, 4, 0, 3, 1])
    assert order(0, "mystery_003") == order(0, "mystery_003") != order(0, "comedy_001")
    assert shuffled_sentences("First. Second.", 0, "x") == "Second. First."  # never the original order
    assert shuffled_sentences("One sentence only.", 0, "x") is None


def test_the_thresholds_file_holds_every_threshold_with_its_reason(tmp_path):
    thresholds = load_thresholds()
    assert thresholds.discrimination.min == 0.8 and thresholds.discrimination.interval_excludes == 0.5
    assert thresholds.position_bias.max == 0.7
    for section in ("discrimination", "adherence", "position_bias", "tie_rate", "failures"):
        assert len(getattr(thresholds, section).why) > 40
    broken = tmp_path / "checks.yaml"
    broken.write_text("level: 0.95\nn_boot: 2000\ndiscrimination: {min: 1.5, why: x}\n")
    with pytest.raises(ValueError, match=r"checks.yaml: .*discrimination.min.*adherence: Field required"):
        load_thresholds(broken)


def test_the_table_has_the_documented_columns(items, instances, tasks, tmp_path):
    _, rows, _ = rows_of("control-always-a", items, instances, tasks, tmp_path)
    markdown = write_judge_checks(rows, tmp_path / "report")
    table = pd.read_csv(tmp_path / "report" / "judge_checks.csv")
    assert tuple(table.columns) == COLUMNS and len(table) == len(rows) == len(judge_checks_table(rows))
    assert table["pass"].dtype == bool and (~table["pass"]).sum() == len(failed_checks(rows))
    assert "position_bias" in markdown and (tmp_path / "report" / "judge_checks.tex").is_file()
