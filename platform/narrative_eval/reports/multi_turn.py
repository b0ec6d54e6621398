"""The default report of a multi-turn study that declares none, from MLflow: its headline numbers per model x setting
x condition (each judge's dimensions with their seed spread and intervals, the truncation and scoring rates), the
paired contrasts between its conditions (the reference condition against each other one, pairs matched on item and
seed, intervals resampling items), and its judges' control checks. The sweep adds its cost table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key, judges_logging
from narrative_eval.reports.judge_card import cell_numbers
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT, ClusterBootstrap
from narrative_eval.stats.paired import paired_contrast

pd = lazy_module("pandas")

TABLE = "conversations.json"
"""A multi-turn cell's table (multi_turn.TABLE): its final rows carry each judge's dimensions."""
RATES = ("truncated_rate", "scored_rate", "regenerated_rate")
"""What every cell of the headline table shows beside its judges' numbers."""
HEADLINE_TITLE = "Headline numbers per model, setting and condition (mean over seeds, SD across seeds, 95% interval)"
CONTRAST_TITLE = "Paired condition contrasts (reference - other, pairs matched on item and seed, 95% interval over items)"


class ConversationStudy(Protocol):
    """What the report reads of a multi-turn study's declaration (multi_turn.MultiTurnStudy)."""

    experiment: str
    id_column: str
    dimensions: tuple[str, ...]

    def condition_order(self) -> Sequence[str]: ...


def write_multi_turn_report(study: ConversationStudy, sweep: str, out_dir: str | Path, data_sha256: str | None,
                            n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> dict[str, str]:
    """`main` and, where the sweep ran two conditions or more, `contrasts`, as CSV, markdown and LaTeX in out_dir,
    with the judges' control checks (judge_checks.csv, a note under the tables of a judge that failed one); returns
    title -> markdown."""
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # A judge whose every verdict failed logs no dimension, only its failure rate: it keeps its rows (and says so).
    judges = sorted({judge for name in (*study.dimensions, "failure_rate") for judge in judges_logging(runs.columns, name)})
    tables = {HEADLINE_TITLE: write_table(_headline(study, runs, judges), out_dir, "main")}
    conditions = _ordered(study, runs["params.condition"].dropna().unique())
    if len(conditions) > 1:
        finals = pd.concat([tracking.load_table(run["run_id"], TABLE).assign(
            model=run["params.model_id"], setting=run["params.prompt_setting"]) for _, run in runs.iterrows()])
        finals = finals[finals["final"].astype(bool)]
        tables[CONTRAST_TITLE] = write_table(_contrasts(study, finals, judges, conditions, n_boot, seed), out_dir,
                                             "contrasts")
    return with_judge_checks(tables, logged_rows(study.experiment, sweep, data_sha256), out_dir,
                             numbers=cell_numbers(study.experiment, sweep, data_sha256))


def _ordered(study: ConversationStudy, conditions: Sequence[str]) -> list[str]:
    """The conditions run, the study's reference (its first declared) first."""
    declared = list(study.condition_order())
    return sorted(conditions, key=lambda c: (declared.index(c) if c in declared else len(declared), c))


def _headline(study: ConversationStudy, runs: Any, judges: Sequence[str]) -> Any:
    table = pd.DataFrame({"model": runs["params.model_id"], "setting": runs["params.prompt_setting"],
                          "condition": runs["params.condition"]})
    names = [*RATES, *(judge_key(judge, name) for judge in judges for name in (*study.dimensions, "failure_rate"))]
    for name in names:
        for suffix in ("", "_sd", "_lo", "_hi"):
            if f"metrics.{name}{suffix}" in runs:
                table[f"{name}{suffix}"] = runs[f"metrics.{name}{suffix}"]
    order = {condition: index for index, condition in enumerate(_ordered(study, list(table["condition"].unique())))}
    return table.sort_values(["model", "setting", "condition"], key=lambda column: column.map(order)
                             if column.name == "condition" else column).reset_index(drop=True)


def _contrasts(study: ConversationStudy, finals: Any, judges: Sequence[str], conditions: Sequence[str],
               n_boot: int, seed: int) -> Any:
    """Per model, setting, judge and dimension, the reference condition against each other one."""
    reference, others = conditions[0], conditions[1:]
    key = [study.id_column, "seed"]
    rows = []
    for (model, setting), group in finals.groupby(["model", "setting"], sort=True):
        base = group[group["condition"] == reference]
        for other in others:
            pairs = base.merge(group[group["condition"] == other], on=key, suffixes=("_ref", "_other"))
            boot = ClusterBootstrap(pairs[study.id_column].astype(str), n_boot=n_boot, seed=seed)
            for judge in judges:
                for dimension in study.dimensions:
                    name = judge_key(judge, dimension)
                    if f"{name}_ref" not in pairs:
                        continue
                    contrast = paired_contrast(pd.to_numeric(pairs[f"{name}_ref"], errors="coerce"),
                                               pd.to_numeric(pairs[f"{name}_other"], errors="coerce"), boot)
                    rows.append({"model": model, "setting": setting, "judge": judge, "dimension": dimension,
                                 "reference": reference, "other": other, "n": contrast["n"],
                                 "mean_reference": contrast["reference"], "mean_other": contrast["other"],
                                 "delta": contrast["delta"], "lo": contrast["lo"], "hi": contrast["hi"]})
    return pd.DataFrame(rows, columns=["model", "setting", "judge", "dimension", "reference", "other", "n",
                                       "mean_reference", "mean_other", "delta", "lo", "hi"])


__all__ = ["CONTRAST_TITLE", "HEADLINE_TITLE", "write_multi_turn_report"]
