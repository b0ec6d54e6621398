"""What a study plugs into the sweep: the Study interface and its registry, what a cell gets from its surroundings
(Runtime) and what it gives back (CellResult). The studies themselves live in `studies/`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.records import CellSpec, ModelSpec
from narrative_eval.registry import Registry

ProgressFactory = Callable[[Iterable[Any], str, int | None], Iterable[Any]]

STUDIES: Registry[type[Study]] = Registry(
    "study", modules=("narrative_eval.studies.infilling", "narrative_eval.studies.incremental")
)
"""Study name -> Study class; entries carry the MLflow `experiment` the study logs to."""


def study(name: str, *, experiment: str | None = None, aliases: Iterable[str] = ()):
    """Register a Study subclass; its runs go to MLflow experiment `experiment` (default: the name)."""

    def register(study_class: type[Study]) -> type[Study]:
        study_class.name = name
        study_class.experiment = experiment or name
        STUDIES.add(name, study_class, aliases=aliases, experiment=study_class.experiment)
        return study_class

    return register


def load_study(name: str) -> Study:
    """An instance of the study registered under `name` (or one of its aliases)."""
    return STUDIES.get(name)()


def experiment_of(name: str) -> str:
    """The MLflow experiment of a study name or alias."""
    return STUDIES.entry(name).meta["experiment"]


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
    generated: int = 0
    """Requests this cell actually sent to engines (cache misses), generators and judges together."""


class Study(ABC):
    """A study: its MLflow experiment, its cell runner, its request counts and its sweep summary."""

    name: str
    """Registry name (set by @study)."""
    experiment: str
    """MLflow experiment its runs go to (set by @study)."""

    @abstractmethod
    def count_requests(self, cell: CellSpec) -> int:
        """Generation requests of one seed of a cell (for dry runs and cost estimates)."""

    @abstractmethod
    def count_judged(self, cell: CellSpec) -> int:
        """Judge requests of one seed and one judge of a cell."""

    @abstractmethod
    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        """Run one cell: generate, score, judge; return what its MLflow run logs."""

    def count_pairs(self, cells: Sequence[CellSpec]) -> int:
        """Pairs of cells' outputs the sweep's end-of-sweep pairwise judges (`pairwise_judges:`) can compare, for dry
        runs and cost estimates; 0 for a study without them."""
        return 0

    @abstractmethod
    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        """Write the sweep's tables/figures to out_dir from its cells on `data_sha256` (all, when None); return
        title -> markdown table for the terminal."""
