"""The human-validation report: python -m experiments.report human-validation on files in each format."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.report import main as report_main
from narrative_eval.errors import UserError, cli_main
from narrative_eval.studies.incremental.human_records import (
    EvidenceStatus,
    PairCase,
    save_pair_cases,
    save_pairwise_evidence,
    save_pairwise_verdicts,
    save_pointwise_ratings,
)
from narrative_eval.studies.incremental.report_human import write_human_validation_report
from narrative_eval.studies.incremental.score_records import save_score_records

from tests.stats.test_human_validation_stats import RATINGS, RECORDS, VERDICTS

REPO = Path(__file__).resolve().parents[2]
COLUMNS = {
    "pointwise_reliability": ["dimension", "n_responses", "n_ratings", "ordinal_alpha", "exact_agreement",
                              "mean_abs_disagreement", "reason"],
    "pointwise_alignment": ["dimension", "n_pairs", "spearman", "lo", "hi", "mae", "n_responses", "reason"],
    "human_paired_effects": ["dimension", "n_pairs", "full", "sharded", "delta", "lo", "hi", "n_full_better", "n_tied",
                             "n_sharded_better", "automated_delta", "reason"],
    "human_aggregation": ["dimension", "median_delta", "median_lo", "median_hi", "centered_delta", "centered_lo",
                          "centered_hi", "reason"],
    "pairwise_agreement": ["judge", "dimension", "n", "directional_agreement", "qwk", "exact_agreement",
                           "collapsed_kappa", "mean_abs_disagreement", "severe_disagreement_rate", "reason"],
    "pairwise_order_consistency": ["judge", "dimension", "n", "n_consistent", "order_restored_consistency", "reason"],
    "pairwise_status_stability": ["judge", "n_items", "n_stable", "status_stability", "reason"],
}
FROM_FILES = [name for name in COLUMNS if name != "pairwise_status_stability"]
"""The tables the command's files give; status stability needs an evidence-first judge's evidence (a sweep's)."""
CASES = [PairCase(f"c{k}", "s1/full", "s1/sharded") for k in range(1, 6)]


def inputs(tmp_path: Path) -> dict[str, Path]:
    return {
        "scores": save_score_records(RECORDS, tmp_path / "scores.jsonl"),
        "pointwise": save_pointwise_ratings(RATINGS, tmp_path / "ratings.jsonl"),
        "pairwise": save_pairwise_verdicts(VERDICTS, tmp_path / "verdicts.jsonl"),
        "cases": save_pair_cases(CASES, tmp_path / "cases.jsonl"),
    }


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_command_writes_every_table_in_three_formats(tmp_path, capsys):
    files = inputs(tmp_path)
    out = tmp_path / "out"
    argv = ["human-validation", "--out", str(out), "--resamples", "300"]
    for name, path in files.items():
        argv += [f"--{name}", str(path)]
    assert cli_main(report_main, argv) == 0
    for name in FROM_FILES:
        columns = COLUMNS[name]
        table = rows(out / f"{name}.csv")
        assert list(table[0]) == columns, name
        assert (out / f"{name}.md").read_text().startswith("|"), name
        assert "\\begin{tabular}" in (out / f"{name}.tex").read_text(), name
    agreement = {r["dimension"]: r for r in rows(out / "pairwise_agreement.csv")}
    assert agreement["constraint_following"]["judge"] == "j"  # the default reference is h, the only non-judge
    assert float(agreement["constraint_following"]["qwk"]) == pytest.approx(11 / 41, abs=1e-6)
    effects = {r["dimension"]: r for r in rows(out / "human_paired_effects.csv")}
    assert float(effects["craft"]["delta"]) == pytest.approx(1 / 3, abs=1e-6)
    printed = capsys.readouterr().out
    assert "Pairwise agreement with h (Table 11)" in printed and f"written to {out}/" in printed


def test_any_subset_of_inputs(tmp_path):
    files = inputs(tmp_path)
    only_ratings = write_human_validation_report(tmp_path / "a", pointwise=files["pointwise"], n_boot=100)
    assert list(only_ratings) == ["Pointwise inter-rater reliability (Table 6)"]
    assert sorted(p.stem for p in (tmp_path / "a").glob("*.csv")) == ["pointwise_reliability"]
    write_human_validation_report(tmp_path / "b", pairwise=files["pairwise"], reference="j")
    swapped = {r["dimension"]: r for r in rows(tmp_path / "b" / "pairwise_agreement.csv")}
    assert swapped["constraint_following"]["judge"] == "h"  # agreement is symmetric: the same 3/5
    assert float(swapped["constraint_following"]["directional_agreement"]) == pytest.approx(0.6)
    assert sorted(p.stem for p in (tmp_path / "b").glob("*.csv")) == ["pairwise_agreement", "pairwise_order_consistency"]


def test_reference_is_asked_for_when_it_is_ambiguous(tmp_path):
    two_people = [v for v in VERDICTS if v.rater == "h"] + [v.__class__(v.case_id, "k", v.order, v.verdicts)
                                                            for v in VERDICTS if v.rater == "h"]
    path = save_pairwise_verdicts(two_people, tmp_path / "v.jsonl")
    with pytest.raises(UserError, match="needs --reference RATER: 2 rater"):
        write_human_validation_report(tmp_path / "out", pairwise=path)
    write_human_validation_report(tmp_path / "out", pairwise=path, reference="h")
    assert float(rows(tmp_path / "out" / "pairwise_agreement.csv")[0]["exact_agreement"]) == 1.0


def test_judge_files_beside_human_ones_and_the_evidence_table(tmp_path, capsys):
    """Several verdict and case files are read together (a sweep's judges beside people); an evidence file gives the
    status-stability table; with judges alone and no --reference, agreement is skipped with a note."""
    files = inputs(tmp_path)
    judge_only = [v for v in VERDICTS if v.rater == "j"]
    people = save_pairwise_verdicts([v for v in VERDICTS if v.rater == "h"], tmp_path / "people.jsonl")
    judges = save_pairwise_verdicts(judge_only, tmp_path / "judges.jsonl")
    # j (c1): k1 satisfied in both orders (stable), k2 partial then missing (not): 1 of 2.
    evidence = save_pairwise_evidence([
        EvidenceStatus("c1", "j", "primary", "A", "s1/full", "k1", "satisfied", "a quote"),
        EvidenceStatus("c1", "j", "reversed", "B", "s1/full", "k1", "satisfied", "a quote"),
        EvidenceStatus("c1", "j", "primary", "A", "s1/full", "k2", "partial", "words"),
        EvidenceStatus("c1", "j", "reversed", "B", "s1/full", "k2", "missing", ""),
    ], tmp_path / "evidence.jsonl")
    together = write_human_validation_report(tmp_path / "both", pairwise=[judges, people], cases=[files["cases"]],
                                             evidence=evidence)
    assert "Pairwise agreement with h (Table 11)" in together  # the same files as one: the same 11/41
    agreement = {r["dimension"]: r for r in rows(tmp_path / "both" / "pairwise_agreement.csv")}
    assert float(agreement["constraint_following"]["qwk"]) == pytest.approx(11 / 41, abs=1e-6)
    [stability] = rows(tmp_path / "both" / "pairwise_status_stability.csv")
    assert list(stability) == COLUMNS["pairwise_status_stability"]
    assert (stability["judge"], stability["n_items"], stability["n_stable"], float(stability["status_stability"])) == (
        "j", "2", "1", 0.5)
    second = save_pairwise_verdicts([v.__class__(v.case_id, "j2", v.order, v.verdicts) for v in judge_only],
                                    tmp_path / "second.jsonl")
    alone = write_human_validation_report(tmp_path / "both", pairwise=[judges, second], evidence=evidence)
    assert alone["Pairwise agreement (Table 11)"].startswith("skipped: every rater is a judge (j, j2)")
    assert not (tmp_path / "both" / "pairwise_agreement.csv").exists()  # the earlier table is not left behind
    named = write_human_validation_report(tmp_path / "named", pairwise=[judges, second], reference="j")
    assert "Pairwise agreement with j (Table 11)" in named
    assert {r["directional_agreement"] for r in rows(tmp_path / "named" / "pairwise_agreement.csv")} == {"1.0"}
    clash = save_pairwise_verdicts([v.__class__(v.case_id, v.rater, v.order, {**v.verdicts, "creative_quality": "A clearly better"})
                                    for v in judge_only[:1]], tmp_path / "clash.jsonl")
    with pytest.raises(UserError, match=r"c1 / j / primary is also in .*judges.jsonl"):
        write_human_validation_report(tmp_path / "x", pairwise=[judges, clash])


def test_bad_files_exit_2_with_every_error_and_no_traceback(tmp_path):
    files = inputs(tmp_path)
    ratings = files["pointwise"].read_text().splitlines()
    ratings[2] = ratings[2].replace('"s1/full"', '"s9/full"')
    ratings.insert(4, "{broken")
    files["pointwise"].write_text("\n".join(ratings) + "\n")
    verdicts = files["pairwise"].read_text().splitlines()
    verdicts.append(verdicts[0].replace('"c1"', '"c7"'))
    verdicts.append(verdicts[0])
    files["pairwise"].write_text("\n".join(verdicts) + "\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.report", "human-validation", "--out", str(out),
         *(arg for name, path in files.items() for arg in (f"--{name}", str(path)))],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2, result.stderr
    errors = result.stderr.splitlines()
    assert all(line.startswith("error: ") for line in errors) and "Traceback" not in result.stderr
    assert f"error: {files['pointwise']}:3: unknown record_id 's9/full' (record_id)" in errors
    assert any(line.startswith(f"error: {files['pointwise']}:5: invalid JSON") for line in errors)
    assert f"error: {files['pairwise']}:16: unknown case_id 'c7' (case_id)" in errors
    assert f"error: {files['pairwise']}:17: duplicate c1 / h / primary (first at line 1)" in errors
    assert not out.exists()  # nothing computed from a bad file


def test_a_single_rater_gives_undefined_statistics_not_a_crash(tmp_path):
    files = inputs(tmp_path)
    alone = save_pointwise_ratings([r for r in RATINGS if r.rater == "a"], tmp_path / "alone.jsonl")
    assert cli_main(report_main, ["human-validation", "--scores", str(files["scores"]), "--pointwise", str(alone),
                                  "--out", str(tmp_path / "out"), "--resamples", "100"]) == 0
    reliability = rows(tmp_path / "out" / "pointwise_reliability.csv")
    assert all(r["ordinal_alpha"] == "" and r["reason"] == "only 1 rater(s) with valid ratings" for r in reliability)
    assert rows(tmp_path / "out" / "human_paired_effects.csv")[0]["n_pairs"] == "2"  # effects need no second rater


def test_usage_mistakes_are_error_lines(tmp_path, capsys):
    files = inputs(tmp_path)
    assert cli_main(report_main, ["human-validation", "--out", str(tmp_path / "o")]) == 2
    assert cli_main(report_main, ["human-validation", "--pointwise", str(files["pointwise"]), "--cases",
                                  str(files["cases"]), "--out", str(tmp_path / "o")]) == 2
    one = save_pairwise_verdicts([v for v in VERDICTS if v.rater == "h"], tmp_path / "one.jsonl")
    assert cli_main(report_main, ["human-validation", "--pairwise", str(one), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: nothing to report: give --pointwise ratings and/or --pairwise verdicts",
        "error: --cases goes with --pairwise",
        "error: nothing to compute from the pairwise verdicts: one rater (h) and no case seen in both orders",
    ]


def test_formats_doc_lists_the_columns_written():
    documented = {}
    for line in (REPO / "docs" / "formats.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].strip("`").split(".csv")[0] in COLUMNS:
            documented[cells[0].strip("`").split(".csv")[0]] = [c.strip() for c in cells[2].split(",")] + ["reason"]
    assert documented == COLUMNS


def test_sweep_score_records_and_the_tables_on_its_parent_run(tmp_path, smollm2_spec):
    """--sweep: the ratings name the score records of an incremental sweep's runs (written here straight into
    MLflow, no model run), which are exported beside the tables; the tables go onto the sweep's parent run."""
    from narrative_eval import tracking
    from narrative_eval.records import CellSpec
    from narrative_eval.study import experiment_of

    experiment = experiment_of("incremental-delivery")
    sweep = f"human-{tmp_path.name}"
    parent = tracking.start_sweep_run(experiment, sweep, {"sweep": sweep})
    for condition in ("full", "sharded"):
        cell = CellSpec(study="incremental-delivery", sweep=sweep, model=smollm2_spec, prompt_setting="default",
                        condition=condition, data_path="tasks.json", data_sha256="0" * 64)
        run_id = tracking.start_cell_run(experiment, cell, parent)
        tracking.client().log_dict(run_id, [r.model_dump(mode="json") for r in RECORDS if r.condition == condition],
                                   "score_records.json")
        tracking.end_run(run_id)
    tracking.end_run(parent)
    files = inputs(tmp_path)
    out = tmp_path / "out"
    assert cli_main(report_main, ["human-validation", "--sweep", sweep, "--pointwise", str(files["pointwise"]),
                                  "--pairwise", str(files["pairwise"]), "--out", str(out), "--resamples", "200"]) == 0
    assert sorted(r.record_id for r in RECORDS) == sorted(
        r["record_id"] for r in map(json.loads, (out / "score_records.jsonl").read_text().splitlines()))
    effects = {r["dimension"]: r for r in rows(out / "human_paired_effects.csv")}
    assert float(effects["craft"]["automated_delta"]) == pytest.approx(0.5)
    attached = {Path(f.path).name for f in tracking.client().list_artifacts(parent, "report/human_validation")}
    # Beside the tables of the files, the human-anchored means and the alternative annotator test of the score
    # records' judge (RECORDS: "auto").
    assert {f"{name}.{ext}" for name in (*FROM_FILES, "ppi_auto", "alt_test_auto") for ext in ("csv", "md", "tex")} == attached
    assert cli_main(report_main, ["human-validation", "--sweep", "no-such-sweep", "--pointwise", str(files["pointwise"]),
                                  "--out", str(tmp_path / "none")]) == 2
