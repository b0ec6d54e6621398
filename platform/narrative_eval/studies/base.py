"""What a study plugs into the sweep: how to run one cell, and how to summarise a sweep."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.records import CellSpec, ModelSpec

ProgressFactory = Callable[[Iterable[Any], str, int | None], Iterable[Any]]


def no_progress(items: Iterable[Any], description: str = "", total: int | None = None) -> Iterable[Any]:
    return items


@dataclass
class Runtime:
    """What a cell needs from its surroundings: backends behind the shared cache, and progress reporting."""

    backend_for: Callable[[ModelSpec], CachedBackend]
    """Returns the cached backend for a model spec (loaded once per process)."""
    progress: ProgressFactory = no_progress
    """Wraps an iterable with a progress display: progress(items, description, total)."""


@dataclass
class CellResult:
    """Everything a cell logs to its MLflow run."""

    metrics: dict[str, float] = field(default_factory=dict)
    """Summary metrics (means across seeds, their SDs, per-seed values under 'seed<k>/...')."""
    params: dict[str, Any] = field(default_factory=dict)
    """Study-specific params beyond the cell spec (rubric hashes, system prompt digest...)."""
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Artifact file name (e.g. 'generations.json') -> rows, logged with mlflow.log_table."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    """Artifact file name -> JSON-serialisable object."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Artifact file name -> matplotlib figure."""
    generated: int = 0
    """Requests this cell actually sent to engines (cache misses), generators and judges together."""


class Study(Protocol):
    """A study: its MLflow experiment, its cell runner and its sweep summary."""

    name: str
    experiment: str

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult: ...

    def summarise(self, sweep: str, out_dir: Path, tracking_uri: str | None = None) -> dict[str, str]:
        """Write the sweep's tables/figures to out_dir; return title -> markdown table for the terminal."""
        ...
