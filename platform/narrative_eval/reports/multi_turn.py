"""The default report of a multi-turn study that declares none, from MLflow: its headline numbers per model x setting
x condition (each judge's dimensions with their seed spread and intervals, the truncation and scoring rates), the
paired contrasts between its conditions (the reference condition against each other one, pairs matched on item and
seed, intervals resampling items), the noise of the judges that judged every reply several times (judge_noise.csv),
its weighted juries (weighted_juries.csv, reports.juries) and its judges' control checks. The sweep adds its cost table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key, judges_logging
from narrative_eval.reports.judge_card import JUDGE_NOISE_NAME, JUDGE_NOISE_TITLE, cell_numbers, noise_gaps, repeat_frame
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.juries import logged_weights, write_weighted_juries
from narrative_eval.reports.labels import sweep_rubrics
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT, ClusterBootstrap
from narrative_eval.stats.judge_reliability import REPEAT_MEANS, noise_table
from narrative_eval.stats.paired import paired_contrast

pd = lazy_module("pandas")

TABLE = "conversations.json"
"""A multi-turn cell's table (multi_turn.TABLE): its final rows carry each judge's dimensions."""
RATES = ("truncated_rate", "scored_rate", "regenerated_rate")
"""What every cell of the headline table shows beside its judges' numbers."""
HEADLINE_TITLE = "Headline numbers per model, setting and condition (mean over seeds, SD across seeds, 95% interval)"
GROUPS = ("model", "setting", "condition")
"""What sets a multi-turn sweep's outputs apart beside the item and seed: the groups its noise table compares."""
CONTRAST_TITLE = "Paired condition contrasts (reference - other, pairs matched on item and seed, 95% interval over items)"


class ConversationStudy(Protocol):
    """What the report reads of a multi-turn study's declaration (multi_turn.MultiTurnStudy)."""

    experiment: str
    id_column: str
    dimensions: tuple[str, ...]

    def condition_order(self) -> Sequence[str]: ...

    def own_rubrics(self) -> tuple[str, ...]: ...


def write_multi_turn_report(study: ConversationStudy, sweep: str, out_dir: str | Path, data_sha256: str | None,
                            n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> dict[str, str]:
    """`main` and, where the sweep ran two conditions or more, `contrasts`, as CSV, markdown and LaTeX in out_dir,
    with the judges' control checks (judge_checks.csv, a note under the tables of a judge that failed one), judge
    dimensions as the rubrics that scored them name them (reports.labels.sweep_rubrics); returns title -> markdown."""
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    rubrics = sweep_rubrics(study, runs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # A judge whose every verdict failed logs no dimension, only its failure rate: it keeps its rows (and says so).
    judges = sorted({judge for name in (*study.dimensions, "failure_rate") for judge in judges_logging(runs.columns, name)})
    tables = {HEADLINE_TITLE: write_table(_headline(study, runs, judges), out_dir, "main", rubrics)}
    conditions = _ordered(study, runs["params.condition"].dropna().unique())
    finals = final_rows(runs)
    if len(conditions) > 1:
        tables[CONTRAST_TITLE] = write_table(_contrasts(study, finals, judges, conditions, n_boot, seed), out_dir,
                                             "contrasts", rubrics)
    noise, numbers = conversation_numbers(study.experiment, sweep, data_sha256, out_dir, finals, study.id_column)
    juries = write_weighted_juries(finals, logged_weights(study.experiment, sweep, data_sha256), GROUPS, out_dir,
                                   rubrics)
    return with_judge_checks({**tables, **noise, **juries}, logged_rows(study.experiment, sweep, data_sha256), out_dir,
                             numbers=numbers)


def final_rows(runs: Any) -> Any:
    """The final turns' rows of the cells `runs` (a multi-turn cell's conversations table), each with its cell's
    model, setting and condition."""
    if runs.empty:
        return pd.DataFrame(columns=["final", *GROUPS])
    finals = pd.concat([tracking.load_table(run["run_id"], TABLE).assign(
        model=run["params.model_id"], setting=run["params.prompt_setting"], condition=run["params.condition"])
        for _, run in runs.iterrows()])
    return finals[finals["final"].astype(bool)]


def conversation_noise(finals: Any, id_column: str, out_dir: str | Path) -> tuple[dict[str, str], dict[str, float]]:
    """judge_noise.csv (reports.judge_card's table, stats.judge_reliability.noise_table) from the repeats a multi-turn
    sweep's judges logged on its final rows (`judge/<id>/<scorer>_repeat_means`): each output a final reply of one
    item and seed in one model x setting x condition group, each judge's scorers apart (their scales differ), named
    `<judge>/<scorer>` where a judge has several scorers. Title -> markdown ({} when no judge repeated) and the noise
    gap of each judge with a single scorer (one of several scorers' gaps is not the judge's)."""
    suffix = f"_{REPEAT_MEANS}"
    found = [(str(column).split("/")[1], str(column).split("/", 2)[2][: -len(suffix)], column)
             for column in finals.columns
             if str(column).startswith("judge/") and str(column).count("/") == 2 and str(column).endswith(suffix)]
    scorers = {judge: [scorer for of, scorer, _ in found if of == judge] for judge, _, _ in found}
    frames = []
    for judge, scorer, column in found:
        shaped = finals[[id_column, "seed", *GROUPS, column]].rename(columns={column: judge_key(judge, REPEAT_MEANS)})
        frame = repeat_frame(shaped, id_column, GROUPS)
        frames.append(frame.assign(judge=judge if len(scorers[judge]) == 1 else f"{judge}/{scorer}"))
    frame = pd.concat(frames) if frames else pd.DataFrame()
    if frame.empty:
        return {}, {}
    noise = noise_table(frame)
    gaps = {judge: gap for judge, gap in noise_gaps(noise).items() if judge in scorers}
    return {JUDGE_NOISE_TITLE: write_table(noise, Path(out_dir), JUDGE_NOISE_NAME)}, gaps


def conversation_numbers(experiment: str, sweep: str, data_sha256: str | None, out_dir: str | Path, finals: Any,
                         id_column: str) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """What a multi-turn report knows of its judges beyond their checks: the noise table (`conversation_noise`) and,
    per judge, the numbers its report card reads (reports.judge_card.cell_numbers, with its noise gap)."""
    numbers = cell_numbers(experiment, sweep, data_sha256)
    noise, gaps = conversation_noise(finals, id_column, out_dir)
    for judge, gap in gaps.items():
        numbers.setdefault(judge, {})["noise_gap"] = gap
    return noise, numbers


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


__all__ = ["CONTRAST_TITLE", "GROUPS", "HEADLINE_TITLE", "conversation_noise", "conversation_numbers", "final_rows",
           "write_multi_turn_report"]
