"""Cell executors: how a sweep's cells are run (in this process, or as Ray tasks), each through
`cells.run_cell_tracked`.

An executor is a function `(cells, config, parent_run_id, progress) -> list[CellOutcome]` registered
with `@executor(name)`; a config picks one with `executor:` or the sweep command with `--executor`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from narrative_eval.registry import Registry

EXECUTORS: Registry[Callable[..., list[Any]]] = Registry(
    "executor", modules=("narrative_eval.executors.local", "narrative_eval.executors.ray")
)
"""Executor name -> function running a sweep's cells."""


def executor(name: str):
    """Register a function `(cells, config, parent_run_id, progress) -> list[CellOutcome]` as an executor."""
    return EXECUTORS(name)


__all__ = ["EXECUTORS", "executor"]
