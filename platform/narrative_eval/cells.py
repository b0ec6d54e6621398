"""Running cells: the backends a process serves cells from (one request cache), one cell into its MLflow run, and
the failure budget that stops a sweep. Every executor runs its cells through `run_cell_tracked`."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from narrative_eval import tracking
from narrative_eval.backends.accounting import add_figures
from narrative_eval.backends.cache import CachedBackend, RequestCache
from narrative_eval.backends.registry import get_backend, release
from narrative_eval.config import SweepConfig
from narrative_eval.errors import ModelLoadError
from narrative_eval.records import CellSpec, ModelSpec
from narrative_eval.study import CellResult, Runtime, load_study

log = logging.getLogger(__name__)


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

    def release(self, spec: ModelSpec) -> bool:
        """Unload a model this pool serves: its backend closes and its engine processes stop. False when not loaded."""
        if self._wrapped.pop(spec.digest(), None) is None:
            return False
        release(spec)
        return True

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


def run_cell_tracked(cell: CellSpec, parent_run_id: str, runtime: Runtime, generated: Callable[[], int],
                     writer: tracking.CellWriter | None = None) -> CellOutcome:
    """Run one cell into its MLflow run unless that run already finished; a `writer` logs it while the caller goes on
    (`finish_outcomes` then marks the cells it could not log)."""
    study = load_study(cell.study)
    existing = tracking.find_cell_run(study.experiment, cell)
    if existing is not None and existing[1] == "FINISHED":
        return CellOutcome(cell, "skipped", run_id=existing[0])
    run_id = tracking.start_cell_run(study.experiment, cell, parent_run_id, existing)
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
        record = writer.submit if writer is not None else tracking.log_cell
        record(run_id, cell, result, lambda: study.evaluation(cell, result))
    except ModelLoadError as error:  # no cell can trust that model: the sweep stops with the error, before any number
        _record_failure(run_id, error)
        raise
    except Exception as error:  # a broken cell is recorded and the sweep goes on
        _record_failure(run_id, error)
        log.error("cell %s failed: %s", cell.run_name, error)
        return CellOutcome(cell, "failed", run_id, generated() - before, time.perf_counter() - start,
                           traceback.format_exc(limit=8))
    return CellOutcome(cell, "finished", run_id, result.generated, time.perf_counter() - start,
                       request_failure_rate=float(result.metrics.get("request_failure_rate", 0.0)))


def _record_failure(run_id: str, error: BaseException) -> None:
    """Mark a cell's run FAILED with the error that stopped it."""
    tracking.end_run(run_id, "FAILED")
    tracking.client().set_tag(run_id, "narrative_eval.error", f"{type(error).__name__}: {error}"[:5000])


def finish_outcomes(outcomes: list[CellOutcome], writer: tracking.CellWriter) -> list[CellOutcome]:
    """Wait for the writer; a cell it could not log becomes failed (its run already is)."""
    failed = writer.close()
    for outcome in outcomes:
        if outcome.run_id in failed and outcome.status == "finished":
            log.error("cell %s failed: %s", outcome.cell.run_name, failed[outcome.run_id])
            outcome.status, outcome.error = "failed", failed[outcome.run_id]
    return outcomes


def over_budget(outcome: CellOutcome, config: SweepConfig) -> bool:
    """True when a cell's failed requests exceed the sweep's failure budget: the sweep stops there."""
    if config.failure_budget is None or outcome.request_failure_rate <= config.failure_budget:
        return False
    log.error("cell %s: %.0f%% of requests failed, over the failure budget of %.0f%%; stopping the sweep",
              outcome.cell.run_name, 100 * outcome.request_failure_rate, 100 * config.failure_budget)
    return True
