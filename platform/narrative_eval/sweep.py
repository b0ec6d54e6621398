"""Grid expansion and the executors that run cells, each as one MLflow child run under the sweep's parent."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narrative_eval import tracking
import pandas as pd

from narrative_eval.backends.accounting import Prices, add_figures, usd
from narrative_eval.backends.batch import batch_enabled, collect_open
from narrative_eval.backends.cache import CachedBackend, RequestCache
from narrative_eval.backends.registry import get_backend
from narrative_eval.config import SweepConfig
from narrative_eval.data.infilling import file_sha256
from narrative_eval.errors import UserError
from narrative_eval.executors import EXECUTORS
from narrative_eval.metrics import metric_names
from narrative_eval.records import CellSpec, ModelSpec
from narrative_eval.studies.base import CellResult, ProgressFactory, Runtime, load_study, no_progress

log = logging.getLogger(__name__)

PROMPT_TOKENS_ESTIMATE = 400
"""Prompt tokens assumed per request when a dry run prices a grid before anything is rendered."""


def expand_grid(config: SweepConfig) -> list[CellSpec]:
    """One frozen CellSpec per model x prompt setting x condition."""
    data_sha = file_sha256(config.data)
    # Fix the metric list now, so a cell's spec (and hash) names exactly the metrics it computes.
    metrics = config.metrics.model_copy(update={"names": metric_names(config.metrics)})
    extra = dict(config.extra)
    if config.constraints:
        extra["constraints"] = config.constraints
        extra["constraints_sha256"] = file_sha256(config.constraints)
    if config.prompt_file:
        extra["prompt_file"] = config.prompt_file
        extra["prompt_file_sha256"] = file_sha256(config.prompt_file)
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
            data_path=config.data,
            data_sha256=data_sha,
            limit=config.limit,
            subset=config.subset,
            metrics=metrics,
            extra=extra,
        )
        for model in config.models
        for setting in config.prompt_settings
        for condition in config.conditions
    ]


class BackendPool:
    """Backends behind one shared request cache, loaded once per process, with request counters."""

    def __init__(self, cache_path: str | None = None):
        self.cache = RequestCache(cache_path)
        self._wrapped: dict[str, CachedBackend] = {}
        self.on_batch_submit: Callable[[str, int], None] | None = None
        """Told (batch id, requests) when a provider batch is submitted: the running cell tags its run."""

    def __call__(self, spec: ModelSpec) -> CachedBackend:
        key = spec.digest()
        if key not in self._wrapped:
            wrapped = CachedBackend(get_backend(spec), self.cache)
            if wrapped.batch is not None:
                wrapped.batch.on_submit = lambda batch_id, n: self.on_batch_submit and self.on_batch_submit(batch_id, n)
            self._wrapped[key] = wrapped
        return self._wrapped[key]

    @property
    def generated(self) -> int:
        return sum(b.generated for b in self._wrapped.values())

    def cost(self) -> dict[str, float]:
        """Tokens and dollars of every reply served so far (Usage.figures, summed over models)."""
        return add_figures(*(b.usage.figures() for b in self._wrapped.values()),
                           *(b.batch.figures() for b in self._wrapped.values() if b.batch is not None))


@dataclass
class CellOutcome:
    """What happened to one cell in this invocation."""

    cell: CellSpec
    """The cell."""
    status: str
    """finished, skipped (already finished earlier) or failed."""
    run_id: str | None = None
    """The cell's MLflow run."""
    generated: int = 0
    """Requests sent to engines for this cell (cache misses)."""
    seconds: float = 0.0
    """Wall time spent on the cell."""
    error: str | None = None
    """Traceback tail when the cell failed."""
    request_failure_rate: float = 0.0
    """Share of the cell's requests that failed after retries."""


def run_cell_tracked(cell: CellSpec, parent_run_id: str, runtime: Runtime, generated: Callable[[], int]) -> CellOutcome:
    """Run one cell into its MLflow run unless that run already finished."""
    study = load_study(cell.study)
    existing = tracking.find_cell_run(study.experiment, cell)
    if existing is not None and existing[1] == "FINISHED":
        return CellOutcome(cell, "skipped", run_id=existing[0])
    run_id = tracking.start_cell_run(study.experiment, cell, parent_run_id)
    before, start = generated(), time.perf_counter()
    pool = runtime.backend_for if isinstance(runtime.backend_for, BackendPool) else None
    cost_before = pool.cost() if pool else {}
    if pool is not None:
        # The batch id goes on the cell's run the moment it is submitted (the cache database has its keys).
        pool.on_batch_submit = lambda batch_id, n: tracking.client().set_tag(run_id, f"narrative_eval.batch.{batch_id}", str(n))
    try:
        result: CellResult = study.run_cell(cell, runtime)
        result.params.update({f"engine.{k}": v for k, v in runtime.backend_for(cell.model).run_params().items()})
        result.generated = generated() - before
        if pool is not None:
            result.metrics.update({f"cost/{k}": v - cost_before.get(k, 0.0) for k, v in pool.cost().items()})
        tracking.log_cell(run_id, cell, result)
    except Exception as error:  # a broken cell is recorded and the sweep goes on
        tracking.end_run(run_id, "FAILED")
        tracking.client().set_tag(run_id, "narrative_eval.error", f"{type(error).__name__}: {error}"[:5000])
        log.error("cell %s failed: %s", cell.run_name, error)
        return CellOutcome(cell, "failed", run_id, generated() - before, time.perf_counter() - start,
                           traceback.format_exc(limit=8))
    return CellOutcome(cell, "finished", run_id, result.generated, time.perf_counter() - start,
                       request_failure_rate=float(result.metrics.get("request_failure_rate", 0.0)))


def over_budget(outcome: CellOutcome, config: SweepConfig) -> bool:
    """True when a cell's failed requests exceed the sweep's failure budget: the sweep stops there."""
    if config.failure_budget is None or outcome.request_failure_rate <= config.failure_budget:
        return False
    log.error("cell %s: %.0f%% of requests failed, over the failure budget of %.0f%%; stopping the sweep",
              outcome.cell.run_name, 100 * outcome.request_failure_rate, 100 * config.failure_budget)
    return True


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
        # This sweep's data only: the same name run on other data keeps its own report folder and tables.
        outcome.tables = study.summarise(config.sweep, out_dir, data_sha256=cells[0].data_sha256)
        outcome.report_dir = out_dir
        totals = write_cost_table(outcomes, out_dir, outcome.tables)
        tracking.log_sweep_outputs(parent, outcome.tables, sorted(p for p in out_dir.glob("*") if p.is_file()),
                                   metrics={f"cost/{k}": v for k, v in totals.items()})
    tracking.end_run(parent, "FAILED" if outcome.count("failed") else "FINISHED")
    return outcome


def collect_batches(config: SweepConfig) -> list[str]:
    """Read finished provider batches of the config's models and judges into its request cache; start nothing new."""
    specs = [*config.models, *(judge.model for judge in config.judges)]
    cache = RequestCache(config.cache)
    try:
        return collect_open(cache, specs, get_backend)
    finally:
        cache.close()


def describe_grid(config: SweepConfig, cells: list[CellSpec] | None = None) -> dict[str, Any]:
    """Counts for a dry run: cells, generations and judge calls, and the estimated costs, loading no model.

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
        judge_calls += judged * len(config.judges)
        per_cell.append(add([(cell.model, units, config.generation.max_new_tokens)]
                            + [(judge.model, judged, judge.max_new_tokens) for judge in config.judges]))
    pairwise = _pairwise_requests(config, cells)
    pairwise_calls = sum(requests for _, requests, _ in pairwise)
    pairwise_cost = add(pairwise)
    return {
        "cells": [(c.model.id, c.prompt_setting, c.condition, c.spec_hash) for c in cells],
        "generations": generations,
        "judge_calls": judge_calls + pairwise_calls,
        "pairwise_calls": pairwise_calls,
        "estimated_cost_usd": sync,
        "estimated_batch_cost_usd": batch,
        "estimated_run_cost_usd": sum(per_cell) + pairwise_cost,
        "cell_costs": per_cell,
        "pairwise_cost": pairwise_cost,
    }


def estimate_lines(config: SweepConfig, grid: dict[str, Any]) -> list[str]:
    """describe_grid's counts and cost estimates in words, one line each (the dry run prints them, the app's
    Launch tab shows them)."""
    pairwise = f"; {grid['pairwise_calls']} of them pairwise, both orders" if config.pairwise_judges else ""
    lines = [f"generations: {grid['generations']}",
             f"judge calls: {grid['judge_calls']} ({len(config.judges)} judge(s){pairwise})",
             f"estimated cost of hosted models (upper bound, every reply at its token limit): "
             f"synchronous {usd(grid['estimated_cost_usd'])}, batch {usd(grid['estimated_batch_cost_usd'])}, "
             f"as configured {usd(grid['estimated_run_cost_usd'])}; local models cost nothing"]
    if config.max_cost_usd is not None:
        over = grid["estimated_run_cost_usd"] - config.max_cost_usd
        lines.append(f"budget (max_cost_usd): {usd(config.max_cost_usd)}"
                     + (f"; over it by {usd(over)}, so the sweep refuses to start" if over > 0 else ""))
    return lines


def _pairwise_requests(config: SweepConfig, cells: list[CellSpec]) -> list[tuple[ModelSpec, int, int]]:
    """(judge model, requests, token limit) of the end-of-sweep pairwise judges: every pair of the grid, up to
    `pairwise_sample`, judged in both orders by every panel judge under every pairwise rubric. Judgments an
    earlier run made are reused, so this is an upper bound."""
    if not config.pairwise_judges:
        return []
    from narrative_eval.studies.pairwise import count_pairs

    pairs = count_pairs(cells)
    if config.pairwise_sample is not None:
        pairs = min(pairs, config.pairwise_sample)
    return [(judge.model, 2 * pairs, entry.max_new_tokens or judge.max_new_tokens)
            for judge in config.judges for entry in config.pairwise_judges]


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
    # Pairwise judgments made earlier are reused, but which are missing is only known at the end: count them all.
    estimate = sum(todo) + grid["pairwise_cost"]
    if estimate > config.max_cost_usd:
        raise UserError(
            f"sweep {config.sweep!r}: the {len(todo)} cell(s) still to run may cost up to {usd(estimate)} "
            f"(every reply at its token limit), over max_cost_usd {usd(config.max_cost_usd)} by "
            f"{usd(estimate - config.max_cost_usd)}; raise max_cost_usd, run hosted models in batch mode (--batch), "
            f"or shrink the grid (--limit, --set models=[...]). Nothing was sent.")


COST_COLUMNS = ("tokens_in", "tokens_out", "requests_sync", "requests_batch", "batches_submitted", "batch_requeued",
                "usd_sync", "usd_batch", "usd_paid")


def write_cost_table(outcomes: list[CellOutcome], out_dir: Path, tables: dict[str, str]) -> dict[str, float]:
    """cost.csv and a 'Cost' table: per cell and in total, tokens and dollars (synchronous, batch, paid by these runs).

    Figures come from each cell's run, so cells finished by an earlier invocation count what they logged then."""
    rows, totals = [], dict.fromkeys(COST_COLUMNS, 0.0)
    for outcome in outcomes:
        if outcome.run_id is None:
            continue
        metrics = tracking.client().get_run(outcome.run_id).data.metrics
        figures = {k: float(metrics.get(f"cost/{k}", 0.0)) for k in COST_COLUMNS}
        rows.append({"cell": outcome.cell.run_name, **figures})
        totals = {k: totals[k] + figures[k] for k in COST_COLUMNS}
    rows.append({"cell": "total", **totals})
    frame = pd.DataFrame(rows)
    frame.to_csv(out_dir / "cost.csv", index=False)
    tables["Cost (tokens; USD at list and batch prices; paid by these runs)"] = frame.to_markdown(index=False, floatfmt=".4g")
    return totals
