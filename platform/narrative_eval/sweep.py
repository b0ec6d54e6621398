"""A sweep: grid expansion, its cells run by an executor (each one MLflow child run under the sweep's parent, see
`cells.py`), its judges' control checks, its report and costs; dry-run counts and cost estimates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.backends.accounting import Prices, usd
from narrative_eval.backends.batch import batch_enabled, collect_open
from narrative_eval.backends.cache import RequestCache
from narrative_eval.backends.registry import get_backend, missing
from narrative_eval.cells import BackendPool, CellOutcome
from narrative_eval.config import SweepConfig
from narrative_eval.data.files import file_sha256
from narrative_eval.errors import UserError, require_file
from narrative_eval.executors import EXECUTORS
from narrative_eval.judges.checks import judge_controls
from narrative_eval.judges.jury import jury_controls, jury_versions
from narrative_eval.lazy import lazy_module
from narrative_eval.metrics import metric_names
from narrative_eval.records import CellSpec, JurySpec, ModelSpec
from narrative_eval.reports.catalog import record_report_source
from narrative_eval.stats.judge_checks import (
    JUDGMENTS_ARTIFACT,
    ROWS_ARTIFACT,
    CheckRow,
    check_metrics,
    check_rows,
    failed_checks_warning,
    failing_judges,
    verdict_tags,
)
from narrative_eval.stats.judge_reliability import JURY_WEIGHTS_ARTIFACT, jury_weights
from narrative_eval.study import ProgressFactory, Study, code_versions, load_study, no_progress
from narrative_eval.tracing import flag_failed_judges

pd = lazy_module("pandas")

entities = lazy_module("mlflow.entities")

PROMPT_TOKENS_ESTIMATE = 400
"""Prompt tokens assumed per request when a dry run prices a grid before anything is rendered."""

AFTER_CELLS = "after the cells"
"""Progress scope of the steps that follow the cells: each is reported as '<scope>: <step>', one item."""
CHECKS_STEP = "control checks"
"""The step that has every judge judge its control items (one part per judge and rubric, each reported as this step)."""
REPORT_STEP = "report"
"""The step that writes the study's tables from MLflow."""
RECORD_STEP = "save to MLflow"
"""The step that writes the cost table and logs the report's files on the sweep's parent run."""


def expand_grid(config: SweepConfig) -> list[CellSpec]:
    """One frozen CellSpec per model x prompt setting x condition."""
    data_sha = file_sha256(config.data)
    # Fix the metric list now, so a cell's spec (and hash) names exactly the metrics it computes.
    # A config that names none gets the study's own (a plugin's metric is no other study's default).
    metrics = config.metrics.model_copy(update={"names": metric_names(config.metrics, load_study(config.study).metrics)})
    extra = {**config.extra, **config.section.cell_extra()}
    # The code that makes the numbers is part of each cell's hash: a study or metric whose version went up (or a
    # plugin's whose distribution changed), or a jury rule that changed, is new cells, never skipped ones.
    juries = tuple(jury for jury in config.juries if not jury.after_checks)  # a weighted one is no cell's
    versions = {**code_versions(config.study, metrics.names or ()), **jury_versions(juries)}
    return [
        CellSpec(
            study=config.study,
            sweep=config.sweep,
            model=model,
            prompt_setting=setting,
            condition=condition,
            seeds=tuple(config.seeds),
            generation=config.generation,
            judges=tuple(config.judges),
            juries=juries,
            data_path=config.data,
            data_sha256=data_sha,
            limit=config.limit,
            subset=config.subset,
            metrics=metrics,
            extra=extra,
            versions=versions,
        )
        for model in config.models
        for setting in config.prompt_settings
        for condition in config.conditions
    ]


@dataclass
class SweepOutcome:
    """The result of one `run_sweep` call."""

    parent_run_id: str
    """The sweep's parent MLflow run."""
    cells: list[CellOutcome]
    """Per-cell outcomes, in grid order."""
    tables: dict[str, str] = field(default_factory=dict)
    """Title -> markdown table of the sweep's report."""
    report_dir: Path | None = None
    """Where the report files were written."""
    judge_checks: list[CheckRow] = field(default_factory=list)
    """Every judge's control checks (judge_checks.csv's rows); empty when the sweep has none."""

    @property
    def generated(self) -> int:
        return sum(c.generated for c in self.cells)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cells)


def run_sweep(
    config: SweepConfig,
    *,
    progress: ProgressFactory = no_progress,
    executor: str | None = None,
    write_report: bool = True,
) -> SweepOutcome:
    """Expand the grid, run every unfinished cell, then write the study's tables."""
    study = load_study(config.study)
    cells = expand_grid(config)
    check_budget(config, cells)
    parent = tracking.start_sweep_run(study.experiment, config.sweep, config.model_dump(mode="json"))
    run = EXECUTORS.get(executor or config.executor)
    try:
        outcomes = run(cells, config, parent, progress)
    except BaseException:
        tracking.end_run(parent, "KILLED")
        raise
    outcome = SweepOutcome(parent, outcomes)
    if write_report and any(o.status != "failed" for o in outcomes):
        out_dir = config.resolved_report_dir()
        _after_cells(study, config, cells, outcome, out_dir, progress)
        record_report_source(out_dir, study.name, config.sweep)
        outcome.report_dir = out_dir
        _step(progress, RECORD_STEP, lambda: _record_report(outcome, out_dir))
    tracking.end_run(parent, "FAILED" if outcome.count("failed") else "FINISHED")
    return outcome


def as_step(progress: ProgressFactory, name: str) -> ProgressFactory:
    """`progress` reporting every stage it is given as the step `name` after the cells ('<AFTER_CELLS>: <name>'),
    so a step made of several stages (the control checks: one per judge and rubric) is the one step its plan names,
    never a stage of the last cell."""
    def step(items: Any, description: str = "", total: int | None = None) -> Any:
        return progress(items, f"{AFTER_CELLS}: {name}", total)
    return step


def _step(progress: ProgressFactory, name: str, run: Callable[[], Any]) -> Any:
    """One step after the cells, reported to `progress` as '<AFTER_CELLS>: <name>' (one item) while it runs."""
    result = None
    for step in progress([run], f"{AFTER_CELLS}: {name}", 1):
        result = step()
    return result


def _record_report(outcome: SweepOutcome, out_dir: Path) -> None:
    """The cost table, then the report's tables, files and cost totals on the sweep's parent run."""
    totals = write_cost_table(outcome.cells, out_dir, outcome.tables)
    files = sorted(p for p in out_dir.glob("*") if p.is_file())
    tracking.log_sweep_outputs(outcome.parent_run_id, outcome.tables, files,
                               metrics={f"cost/{k}": v for k, v in totals.items()})


def has_after_sweep(study: Study) -> bool:
    """Whether the study has steps of its own after the cells (it overrides `after_sweep`)."""
    return type(study).after_sweep is not Study.after_sweep


def after_cell_steps(study: Study, checks: bool = False) -> list[str]:
    """The steps a sweep takes after its cells, in order, as its progress names them: the judges' control checks
    (`checks`: the sweep has some), the report, the study's after-sweep steps (when it has any), and the report's
    record in MLflow."""
    return [*([CHECKS_STEP] if checks else []), REPORT_STEP,
            *([study.after_sweep_stage] if has_after_sweep(study) else []), RECORD_STEP]


def has_checks(config: SweepConfig) -> bool:
    """Whether the sweep's judges get control checks after its cells (checks on, and a judge)."""
    return config.judge_checks.enabled and bool(config.judges)


def progress_plan(config: SweepConfig) -> tuple[list[str], list[str]]:
    """(the stages of a cell, the steps after the cells) of a sweep, named as its progress reports them; a cell's
    stages are empty when its study cannot say them in advance."""
    study = load_study(config.study)
    cells = expand_grid(config)
    return (study.progress_stages(cells[0]) if cells else []), after_cell_steps(study, has_checks(config))


def _after_cells(study: Study, config: SweepConfig, cells: list[CellSpec], outcome: SweepOutcome, out_dir: Path,
                 progress: ProgressFactory) -> None:
    """What needs every cell finished, served by the sweep's backends behind its request cache: the judges'
    control checks (logged before the report, which reads them), the study's tables of this sweep's data only
    (the same name run on other data keeps its own report folder), then the study's after-sweep steps."""
    data_sha256 = cells[0].data_sha256
    pool = BackendPool(config.cache)
    try:
        outcome.judge_checks, judgments = run_judge_checks(study, config, cells, pool, as_step(progress, CHECKS_STEP))
        log_judge_checks(outcome, judgments, data_sha256)
        log_jury_weights(outcome.parent_run_id, config.juries, outcome.judge_checks, data_sha256)
        outcome.tables = _step(progress, REPORT_STEP,
                               lambda: study.summarise(config.sweep, out_dir, data_sha256=data_sha256))
        if has_after_sweep(study):
            outcome.tables.update(_step(progress, study.after_sweep_stage,
                                        lambda: study.after_sweep(config, out_dir, data_sha256, pool)))
    finally:
        pool.cache.close()


def run_judge_checks(study: Study, config: SweepConfig, cells: Sequence[CellSpec],
                     backend_for: Callable[[ModelSpec], Any],
                     progress: ProgressFactory = no_progress) -> tuple[list[CheckRow], list[dict[str, Any]]]:
    """Every judge's control items (the study's), judged once for the sweep through `backend_for` (the sweep's
    backends behind its request cache, so a rerun asks nothing again): the check rows and a record per judgment.
    Nothing when the config turns the checks off or has no judge; never part of a cell's scores."""
    if not config.judge_checks.enabled:
        return [], []
    judged = {judge.id: [judgment for group in study.control_items(config, cells, judge, config.judge_checks.items)
                         for judgment in judge_controls(backend_for(group.judge.model), group.judge, group.items,
                                                        progress)]
              for judge in config.judges}
    # A jury is checked on its members' verdicts on the same items, combined as its scores are: no call of its own.
    # A weighted jury is not: its weights come from these checks.
    judged.update({jury.id: jury_controls(jury, judged) for jury in config.juries if not jury.after_checks})
    rows = [row for judge_id, judgments in judged.items() for row in check_rows(judge_id, judgments)]
    return rows, [judgment.record() for judgments in judged.values() for judgment in judgments]


def log_judge_checks(outcome: SweepOutcome, judgments: list[dict[str, Any]], data_sha256: str) -> None:
    """The checks on the sweep's parent run (rows and judgments as artifacts, `judge_check/<judge>/<check>`
    metrics), each judge's verdict as tag `judge_check/<judge>` on the parent and every cell run, and the warning
    about each judge that failed wherever a cell run wrote its scores (its description, its traces' judge
    assessments: tracing.flag_failed_judges)."""
    rows = outcome.judge_checks
    if not rows:
        return
    c = tracking.client()
    c.log_dict(outcome.parent_run_id, {"data_sha256": data_sha256, "rows": [asdict(row) for row in rows]}, ROWS_ARTIFACT)
    c.log_dict(outcome.parent_run_id, judgments, JUDGMENTS_ARTIFACT)
    tracking.log_sweep_outputs(outcome.parent_run_id, {}, [], metrics=check_metrics(rows))
    tags = [entities.RunTag(key, value) for key, value in verdict_tags(rows).items()]
    cell_runs = [cell.run_id for cell in outcome.cells if cell.run_id is not None]
    for run_id in [outcome.parent_run_id, *cell_runs]:
        c.log_batch(run_id, tags=tags)
    warnings = {judge: failed_checks_warning(judge, checks) for judge, checks in failing_judges(rows).items()}
    for run_id in cell_runs:
        if c.get_run(run_id).info.status == "FINISHED":  # a failed cell wrote no scores
            flag_failed_judges(c, run_id, warnings)


def log_jury_weights(parent_run_id: str, juries: Sequence[JurySpec], rows: Sequence[CheckRow],
                     data_sha256: str) -> None:
    """Each weighted jury's weights from its members' control checks (stats.judge_reliability.jury_weights) on the
    sweep's parent run: the metrics `jury/<id>/weight/<member>` and the artifact the report reads
    (JURY_WEIGHTS_ARTIFACT: {data_sha256, juries}). Arithmetic on the check rows, no call: a rerun logs the same; a
    rerun without weighted juries empties an earlier run's record."""
    weighted = [jury_weights(jury.id, jury.judges, rows) for jury in juries if jury.after_checks]
    folder = JURY_WEIGHTS_ARTIFACT.rsplit("/", 1)[0]
    c = tracking.client()
    if not weighted and JURY_WEIGHTS_ARTIFACT not in {a.path for a in c.list_artifacts(parent_run_id, folder)}:
        return
    c.log_dict(parent_run_id, {"data_sha256": data_sha256, "juries": weighted}, JURY_WEIGHTS_ARTIFACT)
    tracking.log_sweep_outputs(parent_run_id, {}, [], metrics={
        f"jury/{found['jury']}/weight/{member}": weight for found in weighted if found["weights"]
        for member, weight in found["weights"].items()})


def collect_batches(config: SweepConfig) -> list[str]:
    """Read finished provider batches of the config's models and judges into its request cache; start nothing new."""
    specs = [*config.models, *(judge.model for judge in config.judges)]
    cache = RequestCache(config.cache)
    try:
        return collect_open(cache, specs, get_backend)
    finally:
        cache.close()


def describe_grid(config: SweepConfig, cells: list[CellSpec] | None = None) -> dict[str, Any]:
    """Counts for a dry run: cells, generations and judge calls (`control_calls` of them on the judges' control
    items, once per sweep), and the estimated costs, loading no model.

    Costs are upper bounds (every reply at its token limit): `estimated_cost_usd` with every hosted
    request synchronous, `estimated_batch_cost_usd` with every one through a batch API, and
    `estimated_run_cost_usd` as configured (each model's `batch` option); `cell_costs` holds the latter per cell."""
    study = load_study(config.study)
    cells = expand_grid(config) if cells is None else cells
    seeds = len(config.seeds)
    generations = judge_calls = 0
    sync = batch = 0.0
    per_cell: list[float] = []

    def add(priced: list[tuple[ModelSpec, int, int]]) -> float:
        """Adds the requests' synchronous and batch prices to the totals; returns their price as configured."""
        nonlocal sync, batch
        sync += sum(_price(*item) for item in priced)
        batch += sum(_price(*item, batch=True) for item in priced)
        return sum(_price(*item, batch=batch_enabled(item[0])) for item in priced)

    for cell in cells:
        units, judged = study.count_requests(cell) * seeds, study.count_judged(cell) * seeds
        generations += units
        # A judge that repeats (`judge_repeats`) judges each output that many times.
        judge_calls += sum(judged * judge.repeats for judge in config.judges)
        per_cell.append(add([(cell.model, units, config.generation.max_new_tokens)]
                            + [(judge.model, judged * judge.repeats, judge.max_new_tokens) for judge in config.judges]))
    after = study.after_sweep_requests(config, cells)
    after_calls = sum(requests for _, requests, _ in after)
    after_cost = add(after)
    controls = study.control_requests(config, cells, config.judge_checks.items) if config.judge_checks.enabled else []
    control_calls = sum(requests for _, requests, _ in controls)
    control_cost = add(controls)
    return {
        "cells": [(c.model.id, c.prompt_setting, c.condition, c.spec_hash) for c in cells],
        "generations": generations,
        "judge_calls": judge_calls + after_calls + control_calls,
        "after_sweep_calls": after_calls,
        "control_calls": control_calls,
        "estimated_cost_usd": sync,
        "estimated_batch_cost_usd": batch,
        "estimated_run_cost_usd": sum(per_cell) + after_cost + control_cost,
        "cell_costs": per_cell,
        "after_sweep_cost": after_cost,
        "control_cost": control_cost,
    }


def checked_grid(config: SweepConfig) -> dict[str, Any]:
    """describe_grid's counts, after checking every input file the sweep reads: all problems are reported at once
    (the dry run, and the app before it launches a sweep)."""
    problems: list[str] = []
    require_file(config.data, "data file", problems)
    for what, path in config.section.required_files().items():
        require_file(path, what, problems)
    if problems:
        raise UserError(problems)
    # Counting the requests reads and validates the data (every bad row, with its file:line).
    return describe_grid(config)


def cannot_run_here(config: SweepConfig) -> list[str]:
    """Each model and judge of the config that cannot run from this machine, by name, with what it lacks
    (`backends.missing`: a key, a download, a CUDA GPU, a server): the app refuses such a launch, the dry run says it."""
    engines = {f"model {model.id}": model for model in config.models}
    engines.update({f"judge {judge.id}": judge.model for judge in config.judges})
    needs = {name: missing(spec) for name, spec in engines.items()}
    return [f"{name} cannot run here: it {need}" for name, need in needs.items() if need]


def plan_warnings(config: SweepConfig) -> list[str]:
    """What the dry run warns of: engines that cannot run here, then what the study finds in its grid
    (`Study.plan_warnings`)."""
    return cannot_run_here(config) + load_study(config.study).plan_warnings(expand_grid(config))


def estimate_lines(config: SweepConfig, grid: dict[str, Any]) -> list[str]:
    """describe_grid's counts and cost estimates in words, one line each (the dry run prints them, the app's
    Launch tab shows them)."""
    after = f"; {grid['after_sweep_calls']} of them after the cells" if grid["after_sweep_calls"] else ""
    if grid["control_calls"]:
        after += (f"; {grid['control_calls']} on control items, {grid['control_calls'] / grid['judge_calls']:.1%} "
                  f"(judge_checks: {config.judge_checks.items} items per judge)")
    lines = [f"generations: {grid['generations']}",
             f"judge calls: {grid['judge_calls']} ({len(config.judges)} judge(s){after})",
             f"estimated cost of hosted models (upper bound, every reply at its token limit): "
             f"synchronous {usd(grid['estimated_cost_usd'])}, batch {usd(grid['estimated_batch_cost_usd'])}, "
             f"as configured {usd(grid['estimated_run_cost_usd'])}; local models cost nothing"]
    if config.max_cost_usd is not None:
        over = grid["estimated_run_cost_usd"] - config.max_cost_usd
        lines.append(f"budget (max_cost_usd): {usd(config.max_cost_usd)}"
                     + (f"; over it by {usd(over)}, so the sweep refuses to start" if over > 0 else ""))
    return lines


def _price(model: ModelSpec, requests: int, max_new_tokens: int, batch: bool = False) -> float:
    """Upper-bound dollars for `requests` to a priced model (every reply at its token limit)."""
    prices = Prices.of(model)
    return prices.dollars(requests * PROMPT_TOKENS_ESTIMATE, requests * max_new_tokens, batch=batch) if prices else 0.0


def check_budget(config: SweepConfig, cells: list[CellSpec]) -> None:
    """Refuse to start when the cells still to run could cost more than `max_cost_usd` (cells finished earlier are free)."""
    if config.max_cost_usd is None:
        return
    experiment = load_study(config.study).experiment
    grid = describe_grid(config, cells)
    costs = grid["cell_costs"]
    todo = [cost for cell, cost in zip(cells, costs, strict=True)
            if (found := tracking.find_cell_run(experiment, cell)) is None or found[1] != "FINISHED"]
    # After-sweep and control requests made earlier are reused, but which are missing is only known at the end:
    # count them all.
    estimate = sum(todo) + grid["after_sweep_cost"] + grid["control_cost"]
    if estimate > config.max_cost_usd:
        raise UserError(
            f"sweep {config.sweep!r}: the {len(todo)} cell(s) still to run may cost up to {usd(estimate)} "
            f"(every reply at its token limit), over max_cost_usd {usd(config.max_cost_usd)} by "
            f"{usd(estimate - config.max_cost_usd)}; raise max_cost_usd, run hosted models in batch mode (--batch), "
            f"or shrink the grid (--limit, --set models=[...]). Nothing was sent.")


COST_COUNTS = ("tokens_in", "tokens_out", "requests_sync", "requests_batch", "batches_submitted", "batch_requeued")
COST_DOLLARS = ("usd_sync", "usd_batch", "usd_paid")
COST_COLUMNS = COST_COUNTS + COST_DOLLARS


def cost_figures(metrics: dict[str, float]) -> dict[str, int | float]:
    """A cell run's cost metrics: the counts as whole numbers (MLflow keeps every metric as a float, and the table's
    dollar format would print 42972 tokens as 4.297e+04), the dollars as floats; 0 where the run logged none."""
    counts = {k: round(metrics.get(f"cost/{k}", 0)) for k in COST_COUNTS}
    return counts | {k: float(metrics.get(f"cost/{k}", 0.0)) for k in COST_DOLLARS}


def write_cost_table(outcomes: list[CellOutcome], out_dir: Path, tables: dict[str, str]) -> dict[str, int | float]:
    """cost.csv and a 'Cost' table: per cell and in total, tokens and dollars (synchronous, batch, paid by these runs).

    Figures come from each cell's run, so cells finished by an earlier invocation count what they logged then."""
    rows, totals = [], cost_figures({})
    for outcome in outcomes:
        if outcome.run_id is None:
            continue
        figures = cost_figures(tracking.client().get_run(outcome.run_id).data.metrics)
        rows.append({"cell": outcome.cell.run_name, **figures})
        totals = {k: totals[k] + figures[k] for k in COST_COLUMNS}
    rows.append({"cell": "total", **totals})
    frame = pd.DataFrame(rows)
    frame.to_csv(out_dir / "cost.csv", index=False)
    tables["Cost (tokens; USD at list and batch prices; paid by these runs)"] = frame.to_markdown(index=False, floatfmt=".4g")
    return totals
