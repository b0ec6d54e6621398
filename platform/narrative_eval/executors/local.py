"""The `local` executor: every cell in this process, one after the other, backends loaded once."""

from __future__ import annotations

from narrative_eval import tracking
from narrative_eval.cells import BackendPool, finish_outcomes, over_budget, run_cell_tracked
from narrative_eval.config import SweepConfig
from narrative_eval.executors import executor
from narrative_eval.records import CellSpec
from narrative_eval.study import ProgressFactory, Runtime


@executor("local")
def run_local(cells: list[CellSpec], config: SweepConfig, parent_run_id: str, progress: ProgressFactory) -> list:
    """Run the cells in order, each logged while the next one runs; stop after a cell that went over the config's
    failure budget."""
    pool = BackendPool(config.cache)
    runtime = Runtime(backend_for=pool, progress=progress)
    writer = tracking.CellWriter()
    outcomes = []
    try:
        for cell in progress(cells, "cells", len(cells)):
            outcomes.append(run_cell_tracked(cell, parent_run_id, runtime, lambda: pool.generated, writer))
            if over_budget(outcomes[-1], config):
                break
    finally:
        finish_outcomes(outcomes, writer)
    return outcomes
