"""The tables of a single-turn study's sweep, from MLflow: its headline numbers per cell (`main`) and every answer
beside its references (one table named by the study), its judges' noise and weighted juries where the sweep has
them, and its judges' control checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.evaluation import TABLE, SingleTurnStudy
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judges_logging
from narrative_eval.reports.judge_card import judge_numbers
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.juries import logged_weights, write_weighted_juries
from narrative_eval.reports.tables import write_table

pd = lazy_module("pandas")


def write_single_turn_report(study: SingleTurnStudy, sweep: str, out_dir: str | Path, data_sha256: str | None,
                             *, titles: tuple[str, str], answers_file: str,
                             extra: Sequence[str] = ()) -> dict[str, str]:
    """`main` (model, setting, the study's headline metrics its cells logged, then `extra` metrics) and
    `answers_file` (model, setting, item id, seed, references, answer, its scores) as CSV, markdown and LaTeX in
    out_dir, titled `titles`, with the judges' control checks (judge_checks.csv, a note under the tables of a judge
    that failed one); returns title -> markdown."""
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = pd.DataFrame({"model": runs["params.model_id"], "setting": runs["params.prompt_setting"]})
    judges = judges_logging(runs.columns, "qavg")
    headlines = [name for name in study.headline_metrics(judges) if f"metrics.{name}" in runs]
    main = cells.assign(**{name: runs[f"metrics.{name}"] for name in [*headlines, *extra]})
    rows = pd.concat([tracking.load_table(run_id, TABLE).assign(model=model, setting=setting)
                      for run_id, model, setting in zip(runs["run_id"], cells["model"], cells["setting"])])
    scores = [name for name in rows.columns if name in headlines or name.endswith("/qavg")]
    shown = ["model", "setting", study.id_column, "seed", study.reference, study.answer_column, *scores]
    answers = rows[shown].sort_values(["model", "setting", study.id_column, "seed"])
    tables = {titles[0]: write_table(main.sort_values(["model", "setting"]), out_dir, "main"),
              titles[1]: write_table(answers, out_dir, answers_file)}
    noise, numbers = judge_numbers(study.experiment, sweep, data_sha256, out_dir, rows, study.id_column)
    juries = write_weighted_juries(rows, logged_weights(study.experiment, sweep, data_sha256), ("model", "setting"),
                                   out_dir)
    return with_judge_checks({**tables, **noise, **juries}, logged_rows(study.experiment, sweep, data_sha256), out_dir,
                             numbers=numbers)
