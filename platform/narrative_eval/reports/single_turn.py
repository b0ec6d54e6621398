"""The tables of a single-turn study's sweep, from MLflow: its headline numbers per cell (`main`) and every answer
beside its references (one table named by the study), its judges' noise and weighted juries where the sweep has
them, its judges' control checks and report card, and where people rated its outputs (the app's Annotate tab) each
judge's agreement with them, its human-anchored means and the alternative annotator test (reports.human_ratings)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from narrative_eval import annotations, tracking
from narrative_eval.evaluation import TABLE, SingleTurnStudy
from narrative_eval.lazy import lazy_module
from narrative_eval.judges import load_rubric
from narrative_eval.records.keys import judge_key, judges_logging
from narrative_eval.reports.human_ratings import (alt_test, anchored_outputs, human_agreement_table, human_rho,
                                                  stored_ratings)
from narrative_eval.reports.judge_card import judge_numbers
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.juries import logged_weights, weighed_with_people, write_weighted_juries
from narrative_eval.reports.labels import sweep_rubrics
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.ppi import AnchoredOutputs

pd = lazy_module("pandas")


def write_single_turn_report(study: SingleTurnStudy, sweep: str, out_dir: str | Path, data_sha256: str | None,
                             *, titles: tuple[str, str], answers_file: str,
                             extra: Sequence[str] = (), annotations_path: str | Path | None = None) -> dict[str, str]:
    """`main` (model, setting, the study's headline metrics its cells logged, then `extra` metrics) and
    `answers_file` (model, setting, item id, seed, references, answer, its scores) as CSV, markdown and LaTeX in
    out_dir, titled `titles`, with the judges' control checks (judge_checks.csv, a note under the tables of a judge
    that failed one) and report card; where people rated the sweep's outputs (the annotation store at
    `annotations_path`, default the app's), `human_agreement_<judge>`, `ppi_<judge>` and `alt_test_<judge>` per
    judge, its agreement on its card. Judge dimensions read as the rubrics that scored them name them
    (reports.labels.sweep_rubrics). Returns title -> markdown."""
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    rubrics = sweep_rubrics(study, runs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = pd.DataFrame({"model": runs["params.model_id"], "setting": runs["params.prompt_setting"]})
    judges = judges_logging(runs.columns, "qavg")
    headlines = [name for name in study.headline_metrics(judges) if f"metrics.{name}" in runs]
    main = cells.assign(**{name: runs[f"metrics.{name}"] for name in [*headlines, *extra]})
    rows = answer_rows(runs)
    scores = [name for name in rows.columns if name in headlines or name.endswith("/qavg")]
    shown = ["model", "setting", study.id_column, "seed", study.reference, study.answer_column, *scores]
    answers = rows[shown].sort_values(["model", "setting", study.id_column, "seed"])
    tables = {titles[0]: write_table(main.sort_values(["model", "setting"]), out_dir, "main", rubrics),
              titles[1]: write_table(answers, out_dir, answers_file, rubrics)}
    people = human_tables(study, sweep, rows, judges, out_dir, annotations_path, rubrics)
    tables.update(people.tables)
    noise, numbers = judge_numbers(study.experiment, sweep, data_sha256, out_dir, rows, study.id_column)
    for judge, rho in people.rho.items():
        numbers.setdefault(judge, {})["human_rho"] = rho
    juries = write_weighted_juries(rows, weighed_with_people(logged_weights(study.experiment, sweep, data_sha256),
                                                             people.rho), ("model", "setting"), out_dir, rubrics)
    return with_judge_checks({**tables, **noise, **juries}, logged_rows(study.experiment, sweep, data_sha256), out_dir,
                             numbers=numbers)


def answer_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """Every cell's generations rows, stacked, with its model and setting."""
    return pd.concat([tracking.load_table(run_id, TABLE).assign(model=model, setting=setting)
                      for run_id, model, setting in zip(runs["run_id"], runs["params.model_id"],
                                                        runs["params.prompt_setting"])])


def judge_dimensions(study: SingleTurnStudy, rows: pd.DataFrame, judge: str) -> list[str]:
    """The dimensions of the study's rubric that `judge` scored in the rows: what people rate beside it."""
    keys = [dimension.key for dimension in load_rubric(study.rubric).dimensions]
    return [key for key in keys if judge_key(judge, key) in rows]


def anchored_sweep(study: SingleTurnStudy, sweep: str, data_sha256: str | None = None,
                   ratings: str | Path | None = None,
                   annotations_path: str | Path | None = None) -> list[AnchoredOutputs]:
    """A single-turn sweep's outputs per judge with people's ratings so far, for a rating plan: from a ratings CSV
    (`ratings`: annotations.read_ratings_csv's columns, the study's item id as `instance_id`) when given, else from the
    annotation store at `annotations_path` (default: the app's)."""
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    rows = answer_rows(runs)
    judges = judges_logging(runs.columns, "qavg")
    if ratings is not None:
        keys = [dimension.key for dimension in load_rubric(study.rubric).dimensions]
        found = pd.DataFrame(annotations.read_ratings_csv(ratings, keys))
    else:
        found = stored_ratings(sweep, study.experiment, annotations_path)
    return [anchored_outputs(found, rows, judge, dimensions, study.id_column) for judge in judges
            if (dimensions := judge_dimensions(study, rows, judge))]


@dataclass
class HumanTables:
    """What people's ratings of a sweep add to its report."""

    tables: dict[str, str] = field(default_factory=dict)
    """Title -> markdown of each table written."""
    rho: dict[str, float] = field(default_factory=dict)
    """Judge -> its agreement with people, for its report card (human_ratings.human_rho)."""


def human_tables(study: SingleTurnStudy, sweep: str, rows: pd.DataFrame, judges: Sequence[str], out_dir: Path,
                 annotations_path: str | Path | None = None, rubrics: tuple[str, ...] = ()) -> HumanTables:
    """Per judge, over the dimensions of the study's rubric it scored: `human_agreement_<judge>`, `ppi_<judge>` and
    `alt_test_<judge>` from the people's ratings of the sweep's outputs in the annotation store, the dimensions as
    `rubrics` name them; nothing when no one rated them."""
    ratings = stored_ratings(sweep, study.experiment, annotations_path)
    found = HumanTables()
    if ratings.empty or rows.empty:
        return found
    for judge in judges:
        dimensions = judge_dimensions(study, rows, judge)
        if not dimensions:
            continue
        agreement = human_agreement_table(ratings, rows, judge, dimensions, study.id_column)
        found.rho[judge] = human_rho(agreement, judge)
        found.tables[f"Human-human (kappa) and human-judge (Spearman rho) agreement [{judge}]"] = write_table(
            agreement, out_dir, f"human_agreement_{judge}", rubrics)
        found.tables[f"Judge-only, human-only and prediction-powered means [{judge}]"] = write_table(
            anchored_outputs(ratings, rows, judge, dimensions, study.id_column).table(), out_dir, f"ppi_{judge}",
            rubrics)
        found.tables[f"Alternative annotator test [{judge}]"] = write_table(
            alt_test(ratings, rows, judge, dimensions, study.id_column), out_dir, f"alt_test_{judge}", rubrics)
    return found
