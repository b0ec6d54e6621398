"""The `ray` executor: every cell of a sweep is one Ray task with its own resource request.

Select it with `executor: ray` in a sweep config or `--executor ray` on the sweep command.
Each worker process builds its own backends behind the shared request cache and runs the cell
exactly as the local executor does (`run_cell_tracked`): same MLflow child run under the
sweep's parent, same skip/resume rules, same cache keys, so results do not depend on the executor.
As with the local executor, a finished cell is logged by the driver's cell writer (`tracking.CellWriter`:
traces in batches, one writer for the store) while the worker, and its GPUs, go on to the next cell; its
run turns FINISHED only once all is written, so a sweep stopped before that leaves it to be redone.

`executor_options` (all optional):

- `address`: an existing cluster ('auto', 'ray://head:10001', '10.0.0.1:6379'); without it a
  local Ray instance is started for the sweep and shut down afterwards.
- `num_cpus_total`: CPUs of the local instance (default: the machine's CPU count).
- `num_cpus` (default 1), `num_gpus` (default 0), `memory` (bytes), `resources` (custom
  resources, e.g. {'A100': 1}): what each cell asks the scheduler for.
- `per_model`: {model id: {num_cpus, num_gpus, memory, resources}} overrides for cells whose
  generator has that id. Without an override, a cell asks for the GPUs its generator and judges
  hold, as their backends say (`Backend.gpus_for`: a `vllm` model's `options['tensor_parallel_size']`).
- `max_retries` (default 2): extra attempts for a cell that failed or whose worker died; after
  them the cell is recorded as failed and the other cells go on.
- `runtime_env`: extra Ray runtime_env entries (pip, py_modules, ...); the tracking URI, request
  cache and artifact root environment variables are always passed to the workers.

On a multi-node cluster the repository (data files, prompts) must sit at the same path on every
node, e.g. the Docker image's /app, and the tracking URI must be a server every node can reach.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.backends.cache import default_cache_path
from narrative_eval.backends.registry import gpus_for
from narrative_eval.cells import BackendPool, CellOutcome, finish_outcomes, over_budget, run_cell_tracked
from narrative_eval.config import SweepConfig
from narrative_eval.errors import ModelLoadError
from narrative_eval.executors import executor
from narrative_eval.quiet import quiet_dependencies
from narrative_eval.records import CellSpec
from narrative_eval.study import CellResult, ProgressFactory, Runtime, load_study

log = logging.getLogger(__name__)

# Environment every worker needs to write to the same tracking store and request cache as the driver.
FORWARDED_ENV = (
    "MLFLOW_TRACKING_URI",
    "NARRATIVE_EVAL_CACHE",
    "NARRATIVE_EVAL_ARTIFACT_ROOT",
    "MLFLOW_S3_ENDPOINT_URL",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HOME",
)
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources")
DEFAULT_MAX_RETRIES = 2


@dataclass(frozen=True)
class CellResources:
    """What one cell's Ray task asks the scheduler for."""

    num_cpus: float = 1.0
    """CPU slots held while the cell runs."""
    num_gpus: float = 0.0
    """GPUs held while the cell runs (a tensor-parallel group needs all of its GPUs in one task)."""
    memory: int | None = None
    """Heap memory to reserve, in bytes (None: no reservation)."""
    resources: dict[str, float] = field(default_factory=dict)
    """Custom resources, e.g. {'A100': 1} to pin a cell to one GPU type."""

    def ray_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.memory:
            options["memory"] = self.memory
        if self.resources:
            options["resources"] = dict(self.resources)
        return options


def cell_resources(cell: CellSpec, options: dict[str, Any]) -> CellResources:
    """The resource request of one cell: defaults, then the GPUs its models' backends hold, then per-model overrides."""
    request: dict[str, Any] = {
        "num_cpus": float(options.get("num_cpus", 1)),
        "num_gpus": float(options.get("num_gpus", 0)),
        "memory": options.get("memory"),
        "resources": dict(options.get("resources") or {}),
    }
    # Generator and judges share the cell's task, so it needs the largest GPU group among them.
    engines = [cell.model, *(judge.model for judge in cell.judges)]
    request["num_gpus"] = max(request["num_gpus"], *(float(gpus_for(m)) for m in engines))
    override = (options.get("per_model") or {}).get(cell.model.id) or {}
    unknown = set(override) - set(RESOURCE_KEYS)
    if unknown:
        raise ValueError(f"executor_options.per_model.{cell.model.id}: unknown keys {sorted(unknown)}; "
                         f"allowed: {', '.join(RESOURCE_KEYS)}")
    request.update(override)
    return CellResources(
        num_cpus=float(request["num_cpus"]),
        num_gpus=float(request["num_gpus"]),
        memory=int(request["memory"]) if request["memory"] else None,
        resources={k: float(v) for k, v in (request["resources"] or {}).items()},
    )


def _absolute_path(value: str) -> str:
    return str(Path(value).expanduser().resolve())


def worker_env(config: SweepConfig) -> dict[str, str]:
    """Environment for the workers: the driver's tracking, cache and artifact settings, made absolute.

    Relative paths (the default `sqlite:///mlflow.db`, `.cache/requests.sqlite`) would otherwise
    resolve against each worker's own working directory and split the stores.
    """
    env = {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
    uri = tracking.tracking_uri()
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + _absolute_path(uri.removeprefix("sqlite:///"))
    env["MLFLOW_TRACKING_URI"] = uri
    env["NARRATIVE_EVAL_CACHE"] = _absolute_path(config.cache or str(default_cache_path()))
    if env.get("NARRATIVE_EVAL_ARTIFACT_ROOT"):
        env["NARRATIVE_EVAL_ARTIFACT_ROOT"] = _absolute_path(env["NARRATIVE_EVAL_ARTIFACT_ROOT"])
    return env


# --------------------------------------------------------------------------- worker side

# One backend pool per worker process and cache file: a worker that runs several cells loads each model once.
_WORKER_POOLS: dict[str, BackendPool] = {}


@dataclass
class ToDriver:
    """A worker's cell writer: the finished cell goes back to the driver, whose `tracking.CellWriter` logs it."""

    result: CellResult | None = None
    fresh: bool = False
    """Its run was created by the worker (`tracking.hand_over`)."""

    def submit(self, run_id: str, cell: CellSpec, result: CellResult, evaluation: Any) -> None:
        self.result, self.fresh = result, tracking.hand_over(run_id)


def run_cell_on_worker(cell: CellSpec, parent_run_id: str, workdir: str) -> tuple[CellOutcome, CellResult | None, bool]:
    """Body of a cell's Ray task: the local executor's cell runner, with this worker's own backends; the outcome,
    and the finished cell's result for the driver to log (None: nothing to log) and whether its run is fresh."""
    quiet_dependencies()  # a worker is a fresh process: the driver's filters do not reach it
    # Relative data and prompt paths in the cell resolve against the driver's directory when this node has it.
    if workdir and Path(workdir).is_dir():
        os.chdir(workdir)
    cache_path = os.environ.get("NARRATIVE_EVAL_CACHE", "")
    if cache_path not in _WORKER_POOLS:
        _WORKER_POOLS[cache_path] = BackendPool(cache_path or None)
    pool = _WORKER_POOLS[cache_path]
    runtime = Runtime(backend_for=pool)
    to_driver = ToDriver()
    outcome = run_cell_tracked(cell, parent_run_id, runtime, lambda: pool.generated, to_driver)
    return outcome, to_driver.result, to_driver.fresh


def _evaluation(cell: CellSpec, result: CellResult) -> Any:
    return load_study(cell.study).evaluation(cell, result)


# --------------------------------------------------------------------------- driver side


def _connect(options: dict[str, Any]) -> bool:
    """Connect to the configured cluster or start a local instance; True when this call started Ray."""
    import ray

    if ray.is_initialized():
        return False
    address = options.get("address")
    if address:
        ray.init(address=address, log_to_driver=True)
        return True
    ray.init(
        num_cpus=int(options.get("num_cpus_total") or os.cpu_count() or 1),
        num_gpus=options.get("num_gpus_total"),
        include_dashboard=False,
        log_to_driver=True,
    )
    return True


def _record_lost_cell(cell: CellSpec, error: str) -> str | None:
    """Mark the MLflow run of a cell whose worker died as FAILED; returns its run id if it has one."""
    found = tracking.find_cell_run(load_study(cell.study).experiment, cell)
    if found is None:
        return None
    run_id, status = found
    if status != "FINISHED":
        tracking.end_run(run_id, "FAILED")
        tracking.client().set_tag(run_id, "narrative_eval.error", error[-5000:])
    return run_id


def _cancel(pending: dict[Any, int], cells: list[CellSpec], reason: str) -> None:
    """Cancel every task in flight and mark the runs they had started as failed."""
    import ray

    for ref, index in list(pending.items()):
        ray.cancel(ref, force=True)
        _record_lost_cell(cells[index], reason)
    pending.clear()


@executor("ray")
def run_ray(cells: list[CellSpec], config: SweepConfig, parent_run_id: str, progress: ProgressFactory) -> list:
    """Run the cells as Ray tasks; outcomes come back in grid order, progress advances as cells complete.

    Like the local executor, the sweep stops when a finished cell went over the config's failure budget:
    the cells in flight are cancelled and the cells not started stay unstarted (a rerun resumes them).
    """
    import ray

    options = dict(config.executor_options)
    max_retries = int(options.get("max_retries", DEFAULT_MAX_RETRIES))
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**(runtime_env.get("env_vars") or {}), **worker_env(config)}
    workdir = os.getcwd()
    started_here = _connect(options)
    # Ray's own task retries stay off: the loop below retries worker deaths and failed cells alike, up to max_retries.
    remote_cell = ray.remote(max_retries=0)(run_cell_on_worker)

    def submit(index: int):
        cell = cells[index]
        task = remote_cell.options(runtime_env=runtime_env, name=f"cell:{cell.run_name}",
                                   **cell_resources(cell, options).ray_options())
        return task.remote(cell, parent_run_id, workdir)

    outcomes: list[CellOutcome | None] = [None] * len(cells)
    attempts = [1] * len(cells)
    # Summed over attempts: a failed attempt's requests were sent and its time was spent.
    generated = [0] * len(cells)
    seconds = [0.0] * len(cells)

    # Object ref -> cell index of every task in flight.
    pending: dict[Any, int] = {}
    writer = tracking.CellWriter()

    def completed() -> Iterator[int]:
        pending.update({submit(i): i for i in range(len(cells))})
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            index = pending.pop(ref)
            cell = cells[index]
            try:
                outcome, result, fresh = ray.get(ref)
            except ModelLoadError:  # Ray raises the worker's error as its own type: the sweep stops, as locally
                _cancel(pending, cells, "the sweep stopped: a model did not load whole")
                raise
            except Exception as error:  # the worker died or the task could not run
                text = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=4)}"
                outcome = CellOutcome(cell, "failed", None, 0, 0.0, text)
                lost = True
            else:
                lost = False
                if result is not None and outcome.run_id is not None:
                    tracking.take_over(outcome.run_id, fresh)
                    writer.submit(outcome.run_id, cell, result, partial(_evaluation, cell, result))
            generated[index] += outcome.generated
            seconds[index] += outcome.seconds
            if outcome.status == "failed" and attempts[index] <= max_retries:
                log.warning("cell %s failed on attempt %d of %d; retrying", cell.run_name, attempts[index],
                            max_retries + 1)
                attempts[index] += 1
                pending[submit(index)] = index
                continue
            if lost:
                outcome.run_id = _record_lost_cell(cell, outcome.error or "worker lost")
            outcome.generated, outcome.seconds = generated[index], seconds[index]
            outcomes[index] = outcome
            yield index

    try:
        for index in progress(completed(), "cells", len(cells)):
            if over_budget(outcomes[index], config):
                _cancel(pending, cells, "the sweep stopped: a cell went over the failure budget")
                break
    except BaseException:
        # An interrupted sweep must not leave its cells running on a shared cluster.
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        finish_outcomes([o for o in outcomes if o is not None], writer)
        if started_here:
            ray.shutdown()
    return [o for o in outcomes if o is not None]
