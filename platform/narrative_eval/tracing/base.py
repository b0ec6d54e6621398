"""The per-study builders that turn a finished cell into MLflow records, and what they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from narrative_eval.records import CellSpec
from narrative_eval.registry import Registry
from narrative_eval.tracing.records import TraceRecord


@dataclass
class CellRecords:
    """What one cell contributes to MLflow's evaluation records."""

    table: str
    """The cell table whose rows get their trace ids (e.g. 'generations.json')."""
    traces: list[TraceRecord] = field(default_factory=list)
    """One per generation."""
    dataset: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The inputs the cell used, one row per instance or task (logged as the run's dataset)."""


CellBuilder = Callable[[CellSpec, Any], CellRecords]

CELL_BUILDERS: Registry[CellBuilder] = Registry(
    "trace builder", modules=("narrative_eval.tracing.infilling", "narrative_eval.tracing.incremental"))
"""Study name -> the function that builds its cells' records (a study without one logs no traces)."""

cell_builder = CELL_BUILDERS
"""Decorator: `@cell_builder("infilling")` above a study's builder."""


def generation_attributes(cell: CellSpec, seed: int) -> dict[str, Any]:
    """Span attributes every generation carries: which model, how it was asked, with which seed."""
    generation = cell.generation
    return {
        "model": cell.model.id, "backend": cell.model.backend, "weights": cell.model.weights,
        "quantization": cell.model.quantization, "prompt_setting": cell.prompt_setting, "condition": cell.condition,
        "seed": seed, "temperature": generation.temperature, "top_p": generation.top_p,
        "max_new_tokens": generation.max_new_tokens, "sweep": cell.sweep, "spec_hash": cell.spec_hash,
    }
