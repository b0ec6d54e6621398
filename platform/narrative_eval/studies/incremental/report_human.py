"""The human-validation report of the incremental-delivery study (its Tables 5-9 and 11, appendix B.3).

  python -m experiments.report human-validation [--scores records.jsonl | --sweep NAME [--data FILE]]
      [--pointwise ratings.jsonl] [--pairwise verdicts.jsonl [--cases cases.jsonl]] [--reference RATER] --out DIR

With --sweep the score records come from the incremental-delivery sweep's runs in MLflow (exported beside the
tables as score_records.jsonl) and the tables are attached to the sweep's parent run (report/human_validation/).
A sweep that ran pairwise judges (`pairwise_judges:`) adds their verdicts, cases and evidence (exported as
pairwise_verdicts.jsonl, pairwise_cases.jsonl, pairwise_evidence.jsonl) to whatever --pairwise and --cases give.

Files (CSV + markdown + LaTeX each, columns in docs/formats.md), for what was given:

| file | needs | study |
|---|---|---|
| pointwise_reliability | --pointwise | Table 6 |
| pointwise_alignment | --pointwise --scores | Table 7 |
| ppi_<judge> | --pointwise --scores | judge-only, human-only and prediction-powered means |
| alt_test_<judge> | --pointwise --scores, 3+ raters of a response | the alternative annotator test (--alt-test-epsilon) |
| human_paired_effects | --pointwise --scores | Tables 5 and 8 |
| human_aggregation | --pointwise --scores | Table 9 |
| pairwise_agreement | --pairwise (two raters) | Table 11 |
| pairwise_order_consistency | --pairwise (a rater with both orders) | appendix B.3 |
| pairwise_status_stability | evidence of an evidence-first judge (a sweep's) | appendix B.3 |

Pairwise agreement needs a reference rater: --reference, or the only rater that is not a judge. When every rater
is a judge (a sweep's own judges, no human verdicts) it is skipped with a note saying so.

Every file is read and checked before anything is computed; the problems of all of them are reported together.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.errors import UserError
from narrative_eval.reports.tables import file_slug, write_table
from narrative_eval.stats.alt_test import EPSILON
from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.studies.incremental.human_records import (
    EvidenceStatus,
    PairCase,
    PairwiseVerdict,
    PointwiseRating,
    load_pair_cases,
    load_pairwise_evidence,
    load_pairwise_verdicts,
    load_pointwise_ratings,
)
from narrative_eval.studies.incremental.human_stats import (
    human_aggregation,
    human_paired_effects,
    human_pairs,
    judges_of,
    order_consistency,
    pairwise_agreement,
    anchored_responses,
    pointwise_alignment,
    pointwise_alt_test_table,
    pointwise_ppi_table,
    pointwise_reliability,
    status_stability,
)
from narrative_eval.studies.incremental.pairwise_files import export_pairwise_files
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.report import export_sweep_records
from narrative_eval.studies.incremental.score_records import load_score_records
from narrative_eval.studies.incremental.vocabulary import COMPARISON, NAME
from narrative_eval.study import experiment_of

REPORT_FILES: tuple[str, ...] = ("pointwise_reliability", "pointwise_alignment", "human_paired_effects",
                                  "human_aggregation", "pairwise_agreement", "pairwise_order_consistency",
                                  "pairwise_status_stability")
"""The report's tables (each as .csv, .md and .tex)."""

PPI_PREFIX = "ppi_"
"""Stem of the per-judge tables of human-anchored means (ppi_<judge>.csv, .md, .tex), beside REPORT_FILES."""

ALT_TEST_PREFIX = "alt_test_"
"""Stem of the per-judge tables of the alternative annotator test (alt_test_<judge>.csv, .md, .tex)."""


@dataclass
class HumanInputs:
    """The files of one report, loaded and checked."""

    records: list[ScoreRecord] | None = None
    ratings: list[PointwiseRating] | None = None
    verdicts: list[PairwiseVerdict] | None = None
    cases: list[PairCase] | None = None
    evidence: list[EvidenceStatus] | None = None


Files = str | Path | Sequence[str | Path] | None
"""One file, several read together (a sweep's judges beside people's verdicts), or none."""


def _paths(files: Files) -> list[Path]:
    if files is None:
        return []
    return [Path(files)] if isinstance(files, str | Path) else [Path(f) for f in files]


def _load_all(files: Files, load: Callable, ids: Any, key: Callable, errors: list[str]) -> list | None:
    """The lines of every file, each checked by `load`; a `key` seen in two files is an error unless the lines
    are the same (a case both files name alike). None when nothing was given or a file is bad."""
    loaded, first, before = [], {}, len(errors)
    for path in _paths(files):
        try:
            lines = load(path, ids)
        except UserError as error:
            errors.extend(error.problems)
            continue
        for line in lines:
            seen = first.setdefault(key(line), (path, line))
            if seen[0] != path and seen[1] != line:
                errors.append(f"{path}: {' / '.join(map(str, key(line)))} is also in {seen[0]}")
            elif seen[0] == path:
                loaded.append(line)
    return loaded if _paths(files) and len(errors) == before else None


def load_inputs(scores: str | Path | None = None, pointwise: str | Path | None = None, pairwise: Files = None,
                cases: Files = None, evidence: Files = None) -> HumanInputs:
    """Load every file given; raise one UserError with every bad line of all of them (file:line)."""
    inputs = HumanInputs()
    errors: list[str] = []

    def attempt(load, *args):
        try:
            return load(*args)
        except UserError as error:
            errors.extend(error.problems)
            return None

    if scores is not None:
        inputs.records = attempt(load_score_records, scores)
    record_ids = None if inputs.records is None else {r.record_id for r in inputs.records}
    # A bad scores file leaves record_ids None: its own errors are reported, and ids are not checked against it.
    if pointwise is not None:
        inputs.ratings = attempt(load_pointwise_ratings, pointwise, record_ids)
    inputs.cases = _load_all(cases, load_pair_cases, record_ids, lambda c: (c.case_id,), errors)
    case_ids = None if inputs.cases is None else {c.case_id for c in inputs.cases}
    inputs.verdicts = _load_all(pairwise, load_pairwise_verdicts, case_ids, lambda v: (v.case_id, v.rater, v.order),
                                errors)
    inputs.evidence = _load_all(evidence, load_pairwise_evidence, case_ids,
                                lambda e: (e.case_id, e.rater, e.order, e.shown_as, e.constraint_id), errors)
    if errors:
        raise UserError(errors)
    return inputs


def default_reference(verdicts: list[PairwiseVerdict], records: list[ScoreRecord] | None) -> str:
    """The only rater that is not a judge (a judge id of the score records, or a rater who saw a case in both orders)."""
    raters = sorted({v.rater for v in verdicts})
    judges = judges_of(verdicts, {r.judge for r in records or []})
    people = [r for r in raters if r not in judges]
    if len(people) != 1:
        found = ", ".join(people) if people else "none"
        raise UserError(f"pairwise agreement needs --reference RATER: {len(people)} rater(s) are not judges "
                        f"({found}); raters: {', '.join(raters)}")
    return people[0]


def _pointwise_tables(inputs: HumanInputs, out_dir: Path, comparison: str, n_boot: int, seed: int,
                      epsilon: float) -> dict[str, str]:
    tables = {"Pointwise inter-rater reliability (Table 6)":
              write_table(pointwise_reliability(inputs.ratings), out_dir, "pointwise_reliability")}
    if inputs.records is None:
        return tables
    pairs = {how: human_pairs(inputs.ratings, inputs.records, comparison, how) for how in ("mean", "median", "centered")}
    if pairs["mean"].empty:
        raise UserError(f"no rated full/{comparison} pair: pairs match rated responses on story_id and model")
    tables["Automated scores vs mean human rating (Table 7)"] = write_table(
        pointwise_alignment(pairs["mean"], n_boot, seed), out_dir, "pointwise_alignment")
    tables[f"Human paired FULL - {comparison.upper()} effects (Tables 5 and 8)"] = write_table(
        human_paired_effects(pairs["mean"], comparison, n_boot, seed), out_dir, "human_paired_effects")
    tables["Human effects by aggregation: medians, reviewer-centered (Table 9)"] = write_table(
        human_aggregation(pairs, n_boot, seed), out_dir, "human_aggregation")
    for judge in sorted({r.judge for r in inputs.records}):
        tables[f"Judge-only, human-only and prediction-powered means [{judge}]"] = write_table(
            pointwise_ppi_table(inputs.ratings, inputs.records, judge), out_dir, f"{PPI_PREFIX}{file_slug(judge)}")
        tables[f"Alternative annotator test, epsilon {epsilon:g} [{judge}]"] = write_table(
            pointwise_alt_test_table(inputs.ratings, inputs.records, judge, epsilon), out_dir,
            f"{ALT_TEST_PREFIX}{file_slug(judge)}")
    return tables


def _agreement_tables(inputs: HumanInputs, out_dir: Path, reference: str | None, raters: list[str]) -> dict[str, str]:
    """Table 11 against the reference rater; skipped with a note when no reference is named and every rater is a
    judge (a sweep's pairwise judges alone: comparing two judge rubrics is a choice --reference makes)."""
    verdicts = inputs.verdicts
    if reference is None and set(raters) <= judges_of(verdicts, {r.judge for r in inputs.records or []}):
        for ext in ("csv", "md", "tex"):  # no stale table from an earlier report in the same folder
            (out_dir / f"pairwise_agreement.{ext}").unlink(missing_ok=True)
        return {"Pairwise agreement (Table 11)": (
            f"skipped: every rater is a judge ({', '.join(raters)}), so none is a human reference; give human "
            "verdicts with --pairwise, or name the reference with --reference RATER to compare two judges")}
    reference = reference or default_reference(verdicts, inputs.records)
    if reference not in raters:
        raise UserError(f"--reference {reference!r} gave no verdict; raters: {', '.join(raters)}")
    table = pairwise_agreement(verdicts, reference)
    return {f"Pairwise agreement with {reference} (Table 11)": write_table(table, out_dir, "pairwise_agreement")}


def _pairwise_tables(inputs: HumanInputs, out_dir: Path, reference: str | None) -> dict[str, str]:
    verdicts = inputs.verdicts
    raters = sorted({v.rater for v in verdicts})
    tables = _agreement_tables(inputs, out_dir, reference, raters) if len(raters) >= 2 else {}
    consistency = order_consistency(verdicts)
    if not consistency.empty:
        tables["Order-restored consistency (appendix B.3)"] = write_table(consistency, out_dir, "pairwise_order_consistency")
    if inputs.evidence:
        tables["Atomic status stability of evidence-first judges (appendix B.3)"] = write_table(
            status_stability(inputs.evidence), out_dir, "pairwise_status_stability")
    if not tables:
        raise UserError(f"nothing to compute from the pairwise verdicts: one rater ({raters[0]}) and no case seen "
                        "in both orders")
    return tables


def check_usage(pointwise: str | Path | None, pairwise: Files, cases: Files) -> None:
    """Something to report, and --cases only beside --pairwise."""
    if pointwise is None and pairwise is None:
        raise UserError("nothing to report: give --pointwise ratings and/or --pairwise verdicts")
    if cases is not None and pairwise is None:
        raise UserError("--cases goes with --pairwise")


def write_human_validation_report(
    out_dir: str | Path,
    *,
    scores: str | Path | None = None,
    pointwise: str | Path | None = None,
    pairwise: Files = None,
    cases: Files = None,
    evidence: Files = None,
    reference: str | None = None,
    comparison: str = COMPARISON,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    alt_test_epsilon: float = EPSILON,
) -> dict[str, str]:
    """Write the tables the given files allow to out_dir; return title -> markdown table. `pairwise`, `cases` and
    `evidence` (an evidence-first judge's requirement statuses) may each be several files, read together;
    `alt_test_epsilon` is the alternative annotator test's cost margin."""
    check_usage(pointwise, pairwise, cases)
    inputs = load_inputs(scores, pointwise, pairwise, cases, evidence)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables: dict[str, str] = {}
    if inputs.ratings is not None:
        tables.update(_pointwise_tables(inputs, out_dir, comparison, n_boot, seed, alt_test_epsilon))
    if inputs.verdicts is not None:
        tables.update(_pairwise_tables(inputs, out_dir, reference))
    return tables


def human_validation_from_sweep(sweep: str, out_dir: str | Path, *, data_sha256: str | None = None,
                                **options) -> dict[str, str]:
    """The report with an incremental-delivery sweep's score records (exported to out_dir/score_records.jsonl, the
    file the ratings' record_ids name) and its pairwise judges' verdicts, cases and evidence when it ran some
    (exported as out_dir/pairwise_*.jsonl, read before --pairwise and --cases), its files then attached to the
    sweep's parent run under report/human_validation/. `options` as for write_human_validation_report, without
    `scores` and `evidence`."""
    out_dir = Path(out_dir)
    try:
        export_sweep_records(sweep, out_dir, data_sha256)
    except ValueError as error:  # no finished cell run
        raise UserError(str(error)) from None
    embedded = export_pairwise_files(sweep, out_dir, data_sha256)
    if "pairwise" in embedded:
        options = {**options, "pairwise": [embedded["pairwise"], *_paths(options.get("pairwise"))],
                   "cases": [embedded["cases"], *_paths(options.get("cases"))], "evidence": embedded.get("evidence")}
    tables = write_human_validation_report(out_dir, scores=out_dir / "score_records.jsonl", **options)
    parent = tracking.find_sweep_run(experiment_of(NAME), sweep)
    if parent is not None:
        written = {f"{stem}.{ext}" for stem in REPORT_FILES for ext in ("csv", "md", "tex")}
        anchored = {p for prefix in (PPI_PREFIX, ALT_TEST_PREFIX) for p in out_dir.glob(f"{prefix}*")
                    if p.suffix in (".csv", ".md", ".tex")}
        for path in sorted(p for p in out_dir.iterdir() if p.name in written or p in anchored):
            tracking.client().log_artifact(parent, str(path), artifact_path="report/human_validation")
    return tables


def anchored_sweep_responses(sweep: str, data_sha256: str | None, pointwise: str | Path | None) -> list[AnchoredOutputs]:
    """An incremental-delivery sweep's responses per judge of its score records, with the pointwise ratings of the
    file given (the study keeps no ratings of its own), for a rating plan."""
    if pointwise is None:
        raise UserError(f"a {NAME} sweep's ratings are a pointwise ratings file: give --ratings ratings.jsonl")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            records = export_sweep_records(sweep, scratch, data_sha256)
        except ValueError as error:  # no finished cell run
            raise UserError(str(error)) from None
    ratings = load_pointwise_ratings(pointwise, {r.record_id for r in records})
    return [anchored_responses(ratings, records, judge) for judge in sorted({r.judge for r in records})]


__all__ = ["HumanInputs", "anchored_sweep_responses", "human_validation_from_sweep", "default_reference", "load_inputs", "write_human_validation_report"]
