"""The incremental sweep's pairwise judges on the real embedded model: FULL/SHARDED pairs judged under the simple
and the evidence-first rubric in both orders, written in the human-validation formats onto the sweep's parent run,
resumed without judging twice, and read back by the human-validation report."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments.report import main as report_main
from narrative_eval.errors import UserError, cli_main
from narrative_eval.studies.incremental.human_records import (
    ORDERS,
    PairwiseVerdict,
    load_pair_cases,
    load_pairwise_evidence,
    load_pairwise_verdicts,
    save_pairwise_verdicts,
)

RATERS = ["smollm2-judge/pairwise", "smollm2-judge/pairwise_evidence"]

# One tiny task (five shards, two requirements), so that every judge's answer is short on two CPU cores.
TASK = {
    "domain": "mystery", "item_id": 1, "title": "The Bottle",
    "full_instruction": "Write a very short mystery story about a lighthouse keeper who finds a message in a "
                        "bottle. Tell it in the first person.",
    "shards": ["Write a very short mystery story.", "The main character is a lighthouse keeper.",
               "The keeper finds a message in a bottle.", "Tell it in the first person.", "Keep it very short."],
}
CHECKLIST = {"story_id": "mystery_001", "domain": "mystery", "item_id": 1, "title": "The Bottle", "constraints": [
    {"constraint_id": "c1", "type": "premise", "requirement": "The keeper finds a message in a bottle.",
     "introduced_at_shard": 2},
    {"constraint_id": "c2", "type": "perspective", "requirement": "Told in the first person.",
     "introduced_at_shard": 3},
]}


def tiny_config(tmp_path: Path, sweep: str, pairwise: str = "[pairwise, {rubric: pairwise_evidence, max_new_tokens: 320}]",
                conditions: str = "[full, sharded]") -> Path:
    (tmp_path / "tasks.json").write_text(json.dumps([TASK]))
    (tmp_path / "constraints.jsonl").write_text(json.dumps(CHECKLIST) + "\n")
    path = tmp_path / "pairwise.yaml"
    path.write_text(f"""
study: incremental-delivery
sweep: {sweep}
data: {tmp_path / 'tasks.json'}
constraints: {tmp_path / 'constraints.jsonl'}
models: [smollm2]
prompt_settings: [default]
conditions: {conditions}
seeds: [0]
generation: {{temperature: 0.8, max_new_tokens: 24}}
judges:
  - {{id: smollm2-judge, model: smollm2, max_new_tokens: 160}}
pairwise_judges: {pairwise}
truncation: {{regenerate: 0, score: true}}
report_dir: {tmp_path / 'report'}
judge_checks: false  # what is counted here is the pairwise judges' own calls (tests/test_sweep_judge_checks.py: controls)
""")
    return path


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def parent_files(parent: str, folder: str, dest: Path) -> dict[str, Path]:
    from narrative_eval import tracking

    dest.mkdir(parents=True, exist_ok=True)
    return {name: Path(tracking.client().download_artifacts(parent, f"{folder}/{name}", str(dest)))
            for name in ("verdicts.jsonl", "cases.jsonl", "evidence.jsonl", "judgments.json")}


def stability_by_hand(evidence) -> float:
    """Share of (case, response, requirement) with the same status in both orders."""
    seen: dict[tuple, dict[str, str]] = {}
    for e in evidence:
        seen.setdefault((e.case_id, e.record_id, e.constraint_id), {})[e.order] = e.status
    both = [s for s in seen.values() if len(s) == 2]
    return sum(s["primary"] == s["reversed"] for s in both) / len(both)


@pytest.mark.slow
def test_sweep_pairwise_judges_write_verdicts_resume_and_report(tmp_path, repo_root, capsys):
    pytest.importorskip("llama_cpp")
    from narrative_eval import tracking
    from narrative_eval.config import load_config
    from narrative_eval.data.files import file_sha256
    from narrative_eval.studies.incremental.pairwise_files import artifact_dir
    from narrative_eval.studies.incremental.pairwise import run_pairwise_judges
    from narrative_eval.sweep import run_sweep

    sweep = f"pairwise-{tmp_path.name}"
    config = load_config(tiny_config(tmp_path, sweep), catalog=repo_root / "experiments/configs/models.yaml")
    outcome = run_sweep(config)
    assert outcome.count("failed") == 0, [c.error for c in outcome.cells]
    folder = artifact_dir(file_sha256(str(tmp_path / "tasks.json")))
    files = parent_files(outcome.parent_run_id, folder, tmp_path / "first")

    # The files load with the human-validation loaders, each id checked against the one it names.
    records = {json.loads(line)["record_id"] for line in (tmp_path / "report" / "score_records.jsonl").open()}
    [case] = load_pair_cases(files["cases.jsonl"], records)
    assert (case.case_id, case.record_a, case.record_b) == (
        "smollm2/mystery_001/seed0", "smollm2/full/mystery_001/seed0/smollm2-judge",
        "smollm2/sharded/mystery_001/seed0/smollm2-judge")
    verdicts = load_pairwise_verdicts(files["verdicts.jsonl"], {case.case_id})
    assert sorted((v.rater, v.order) for v in verdicts) == [(r, o) for r in RATERS for o in sorted(ORDERS)]
    judgments = json.loads(files["judgments.json"].read_text())
    assert len(judgments) == 4 and all(j["ok"] for j in judgments), [j["error"] for j in judgments]
    evidence = load_pairwise_evidence(files["evidence.jsonl"], {case.case_id})
    # Two requirements of two responses in two orders; the response shown as A in the primary order is FULL's.
    assert len(evidence) == 8 and {e.rater for e in evidence} == {RATERS[1]}
    assert {(e.order, e.shown_as, e.record_id) for e in evidence} == {
        ("primary", "A", case.record_a), ("primary", "B", case.record_b),
        ("reversed", "A", case.record_b), ("reversed", "B", case.record_a)}
    metrics = tracking.client().get_run(outcome.parent_run_id).data.metrics
    assert metrics[f"pairwise/{RATERS[1]}/status_stability"] == pytest.approx(stability_by_hand(evidence))
    assert metrics["pairwise/n_cases"] == 1 and metrics["pairwise/judged"] == 2
    assert metrics[f"pairwise/{RATERS[0]}/failure_rate"] == 0.0
    consistency = rows(tmp_path / "report" / "pairwise_order_consistency.csv")
    assert sorted((r["judge"], r["dimension"]) for r in consistency) == [
        (r, d) for r in RATERS for d in ("constraint_following", "creative_quality")]
    assert any("order-restored consistency" in title for title in outcome.tables)

    # A rerun skips the cells and judges nothing again: same files, no line twice.
    again = run_sweep(config)
    assert again.count("skipped") == 2
    rerun = parent_files(again.parent_run_id, folder, tmp_path / "second")
    for name in ("verdicts.jsonl", "cases.jsonl", "evidence.jsonl", "judgments.json"):
        assert rerun[name].read_bytes() == files[name].read_bytes(), name
    metrics = tracking.client().get_run(again.parent_run_id).data.metrics
    assert (metrics["pairwise/judged"], metrics["pairwise/reused"]) == (0, 2)
    asked = []
    run_pairwise_judges(config, tmp_path / "third", asked.append)
    assert asked == []  # nothing left to judge: no judge model was even asked for

    # The report on the sweep picks the judges' files up; with judges alone agreement is skipped with a note.
    out = tmp_path / "human"
    assert cli_main(report_main, ["human-validation", "--sweep", sweep, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skipped: every rater is a judge" in printed and not (out / "pairwise_agreement.csv").exists()
    assert rows(out / "pairwise_order_consistency.csv") == consistency
    [stability] = rows(out / "pairwise_status_stability.csv")
    assert (stability["judge"], float(stability["status_stability"])) == (RATERS[1], pytest.approx(
        stability_by_hand(evidence)))
    attached = {Path(f.path).name for f in tracking.client().list_artifacts(again.parent_run_id, "report/human_validation")}
    assert {"pairwise_order_consistency.csv", "pairwise_status_stability.csv"} <= attached

    # A person's verdicts in the sweep's case ids: agreement of each judge rubric with that person.
    person = save_pairwise_verdicts([PairwiseVerdict(case.case_id, "ann", "primary", {
        "constraint_following": "A slightly better", "creative_quality": "Tie"})], tmp_path / "ann.jsonl")
    assert cli_main(report_main, ["human-validation", "--sweep", sweep, "--pairwise", str(person),
                                  "--out", str(tmp_path / "with-ann")]) == 0
    agreement = rows(tmp_path / "with-ann" / "pairwise_agreement.csv")
    assert sorted({r["judge"] for r in agreement}) == RATERS and {r["n"] for r in agreement} == {"1"}


def test_config_option_is_checked(tmp_path, repo_root):
    from narrative_eval.config import load_config

    catalog = repo_root / "experiments/configs/models.yaml"
    config = load_config(tiny_config(tmp_path, "checked"), catalog=catalog)
    assert [(e.rubric, e.max_new_tokens) for e in config.section.pairwise_judges] == [("pairwise", None),
                                                                               ("pairwise_evidence", 320)]
    with pytest.raises(UserError) as caught:
        load_config(tiny_config(tmp_path, "bad", pairwise="[creative_quality, pairwise, pairwise]",
                                conditions="[full, recap]"), catalog=catalog)
    message = "\n".join(caught.value.problems)
    assert "conditions lack sharded" in message
    assert "'creative_quality' is a scores rubric" in message and "names a rubric twice" in message
    with pytest.raises(UserError, match="unknown rubric 'nope'"):
        load_config(tiny_config(tmp_path, "bad", pairwise="[nope]"), catalog=catalog)


def test_pairwise_sample_needs_pairwise_judges(tmp_path, repo_root):
    from narrative_eval.config import load_config

    catalog = repo_root / "experiments/configs/models.yaml"
    path = tiny_config(tmp_path, "sampled")
    path.write_text(path.read_text() + "pairwise_sample: 30\n")
    assert load_config(path, catalog=catalog).section.pairwise_sample == 30
    path.write_text(path.read_text().replace("pairwise_judges: [pairwise, {rubric: pairwise_evidence, "
                                             "max_new_tokens: 320}]", "pairwise_judges: []"))
    with pytest.raises(UserError, match="pairwise_sample chooses the pairs of pairwise_judges"):
        load_config(path, catalog=catalog)


def test_sample_of_pairs_is_fixed_and_kept_when_the_sweep_grows():
    from narrative_eval.records import stable_hash
    from narrative_eval.studies.incremental.human_records import PairCase
    from narrative_eval.studies.incremental.pairwise import Pair, sample_pairs

    def pairs(models):
        return [Pair(PairCase(f"{m}/story_{k:03d}/seed0", f"{m}-full-{k}", f"{m}-sharded-{k}"), {})
                for m in models for k in range(20)]

    one = pairs(["m1"])
    drawn = sample_pairs(one, 5)
    # The five case ids that hash lowest, in the pairs' own order.
    lowest = sorted(one, key=lambda p: (stable_hash(p.case.case_id), p.case.case_id))[:5]
    assert [p.case.case_id for p in drawn] == [p.case.case_id for p in one if p in lowest]
    assert sample_pairs(list(reversed(one)), 5) == list(reversed(drawn))
    assert sample_pairs(one, None) == one and sample_pairs(one, 50) == one
    # A second model's pairs can only push drawn cases out, never pull undrawn ones of the first model in.
    grown = {p.case.case_id for p in sample_pairs(pairs(["m1", "m2"]), 5)}
    assert {c for c in grown if c.startswith("m1/")} <= {p.case.case_id for p in drawn}


def test_dry_run_counts_and_prices_pairwise_calls(tmp_path, repo_root):
    from narrative_eval.config import load_config
    from narrative_eval.sweep import describe_grid

    catalog = repo_root / "experiments/configs/models.yaml"
    plain = load_config(tiny_config(tmp_path, "counted", pairwise="[]"), catalog=catalog)
    path = tiny_config(tmp_path, "counted")
    config = load_config(path, catalog=catalog)
    with_pairs, without = describe_grid(config), describe_grid(plain)
    # One task, one seed, one model: one pair, two orders, one judge, two rubrics.
    assert with_pairs["after_sweep_calls"] == 4 and without["after_sweep_calls"] == 0
    assert with_pairs["judge_calls"] == without["judge_calls"] + 4

    # A priced judge: each pairwise call is priced at its rubric's token limit.
    path.write_text(path.read_text().replace(
        "  - {id: smollm2-judge, model: smollm2, max_new_tokens: 160}",
        "  - {id: api-judge, model: {id: api-judge, backend: openai, weights: gpt-x, "
        "options: {prices: {input_per_mtok: 1.0, output_per_mtok: 10.0}}}, max_new_tokens: 160}"))
    priced = describe_grid(load_config(path, catalog=catalog))
    # Two orders at the simple rubric's limit (the judge's 160) and two at the evidence-first one's 320.
    assert priced["after_sweep_calls"] == 4
    assert priced["after_sweep_cost"] == pytest.approx(
        sum(_dollars(160) for _ in range(2)) + sum(_dollars(320) for _ in range(2)))
    assert priced["estimated_run_cost_usd"] == pytest.approx(sum(priced["cell_costs"]) + priced["after_sweep_cost"])


def _dollars(max_new_tokens: int) -> float:
    from narrative_eval.sweep import PROMPT_TOKENS_ESTIMATE

    return (PROMPT_TOKENS_ESTIMATE * 1.0 + max_new_tokens * 10.0) / 1e6
