"""Progress of a sweep: tqdm bars in a terminal, and a small JSON file that the app's Launch tab reads.

The file (path from NARRATIVE_EVAL_PROGRESS_FILE, set by the app for the jobs it starts) holds the cells
done out of the grid's cells, the current cell and the stages it went through so far (each with its items
done out of its total, named as the study's progress calls name them), the cells that failed (a failed cell is
counted as failed, never as done), then the steps after the cells (report, the study's after-sweep steps), so the
app shows where a sweep stands, survives a page reload or an app restart, and can say what a stop interrupted.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from narrative_eval import tracking
from narrative_eval.study import experiment_of
from narrative_eval.sweep import AFTER_CELLS

PROGRESS_ENV = "NARRATIVE_EVAL_PROGRESS_FILE"
"""Where the sweep writes its progress JSON (unset: no file)."""

WRITE_EVERY = 0.5
"""Seconds between two writes of the progress file (the last state of a stage is always written)."""


STOP = threading.Event()
"""Set when the sweep is asked to stop (SIGTERM); every stage checks it between items."""


class Stopped(KeyboardInterrupt):
    """SIGTERM (the app's Stop button, a scheduler): the sweep stops like on Ctrl-C."""


def request_stop(_signum=None, _frame=None) -> None:
    """Signal handler: raise Stopped once; stages also stop at their next item in case a C callback swallowed it."""
    if STOP.is_set():
        return  # a second SIGTERM (the job runner forwards the group's) must not interrupt the clean-up
    STOP.set()
    raise Stopped()


def stoppable(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        if STOP.is_set():
            raise Stopped()
        yield item


def tqdm_progress(items: Iterable[Any], description: str = "", total: int | None = None) -> Iterable[Any]:
    """Progress bar per stage with counts and ETA; nested bars stack below the cells bar."""
    position = 0 if description == "cells" else 1
    requests = _requests(items, total)
    bar = tqdm(stoppable(items), desc=description, total=total if total is not None else _length(items),
               position=position, leave=description == "cells", dynamic_ncols=True)
    return file_progress(bar, description, total, requests) if os.environ.get(PROGRESS_ENV) else bar


def plain_progress(items: Iterable[Any], description: str = "", total: int | None = None) -> Iterable[Any]:
    """No bars (--no-progress), but still the progress file when one is asked for."""
    requests = _requests(items, total)
    return file_progress(stoppable(items), description, total, requests) if os.environ.get(PROGRESS_ENV) else stoppable(items)


def _length(items: Iterable[Any]) -> int | None:
    return len(items) if hasattr(items, "__len__") else None


def units(item: Any) -> int:
    """Requests an item of a stage stands for: a batch (list, or a tuple led by a list) counts its members."""
    if isinstance(item, list):
        return len(item)
    if isinstance(item, tuple) and item and isinstance(item[0], list):
        return len(item[0])
    return 1


def _requests(items: Iterable[Any], total: int | None) -> int | None:
    return sum(units(i) for i in items) if isinstance(items, list) else total


class _State:
    """The sweep's progress as last written."""

    cells_done = 0
    """Cells that ended, failed ones included."""
    cells_failed: list[str] = []
    """Run names of the cells that failed."""
    cells_total: int | None = None
    cell = ""
    phase = "cells"
    stages: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    written = 0.0


def _payload() -> dict[str, Any]:
    return {"cells_done": _State.cells_done, "cells_failed": _State.cells_failed, "cells_total": _State.cells_total,
            "cell": _State.cell,
            "phase": _State.phase, "stages": _State.stages, "after": _State.after, "updated": time.time()}


def _write(force: bool = False) -> None:
    now = time.monotonic()
    if not force and now - _State.written < WRITE_EVERY:
        return
    _State.written = now
    path = Path(os.environ[PROGRESS_ENV])
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(_payload()))
        os.replace(tmp, path)
    except OSError:
        pass  # progress is a courtesy: a full disk or a removed folder must not stop the sweep


def stage_name(description: str, cell: str) -> str:
    """A stage as the app names it: the description without its cell's run name ('smollm2/L2: generate' ->
    'generate', 'gemma3/L0/full seed 1: full turns' -> 'seed 1: full turns')."""
    if cell and description.startswith(cell):
        return description[len(cell):].lstrip(" :") or description
    return description.rsplit(": ", 1)[-1]


def file_progress(items: Iterable[Any], description: str, total: int | None, requests: int | None) -> Iterator[Any]:
    """Pass items through, recording cells done, the current cell's stages and the steps after the cells, with the
    items each stage has done out of its total, in the progress file."""
    if description == "cells":
        _State.cells_total = total
        for item in items:
            # The local executor hands out the cell itself; others (Ray) hand out an index.
            _State.cell, _State.stages = getattr(item, "run_name", ""), []
            _write(force=True)
            yield item
            _State.cells_done += 1
            if _failed(item):
                _State.cells_failed = [*_State.cells_failed, _State.cell]
        _write(force=True)
        return
    scope, _, step = description.partition(": ")
    if scope == AFTER_CELLS and _State.after and _State.after[-1]["name"] == step:
        # A step reported in several parts (the control checks: one per judge and rubric) is one stage: its counts add.
        _State.phase, stage = AFTER_CELLS, _State.after[-1]
        stage["total"] = None if stage["total"] is None or requests is None else stage["total"] + requests
    elif scope == AFTER_CELLS:
        _State.phase, stage = AFTER_CELLS, {"name": step, "done": 0, "total": requests}
        _State.after = [*_State.after, stage]
    else:
        stage = {"name": stage_name(description, _State.cell), "done": 0, "total": requests}
        _State.stages = [*_State.stages, stage]
    _write(force=True)
    for item in items:
        yield item
        stage["done"] += units(item)
        _write()
    _write(force=True)


def _failed(cell: Any) -> bool:
    """Whether a cell the executor has just handed back ended FAILED in MLflow (an executor that hands out indices,
    Ray's, is not asked: its cells' states are read from MLflow by the app)."""
    study, spec_hash = getattr(cell, "study", None), getattr(cell, "spec_hash", None)
    if not study or not spec_hash:
        return False
    try:
        found = tracking.find_cell_run(experiment_of(study), cell)
    except Exception:  # progress is a courtesy: an unreachable store must not stop the sweep here
        return False
    return found is not None and found[1] == "FAILED"


def read_progress(path: str | Path) -> dict[str, Any] | None:
    """The progress a sweep wrote, or None when there is none (yet)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
