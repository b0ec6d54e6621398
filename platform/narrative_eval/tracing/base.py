"""What a study gives tracing for one finished cell (CellEvaluation: its records, prompts and headline metrics),
and what the studies' trace builders share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec
from narrative_eval.tracing.records import TraceRecord

pd = lazy_module("pandas")


@dataclass
class CellRecords:
    """What one cell contributes to MLflow's evaluation records."""

    table: str
    """The cell table whose rows get their trace ids (e.g. 'generations.json')."""
    traces: list[TraceRecord] = field(default_factory=list)
    """One per generation."""
    dataset: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    """The inputs the cell used, one row per instance or task (logged as the run's dataset)."""
    expectations: tuple[str, ...] = ()
    """Columns of `dataset` that hold an expected output (a gold text): the evaluation dataset's expectations."""


@dataclass
class CellEvaluation:
    """Everything study-specific tracing writes for one cell (Study.cell_records, used_templates, headline_metrics)."""

    records: CellRecords | None = None
    """Traces and dataset input (None: the study logs none)."""
    templates: dict[str, Any] = field(default_factory=dict)
    """Prompt-registry name -> template of every prompt and rubric the cell used."""
    headline: list[str] = field(default_factory=list)
    """Metric names its description shows first, where the cell logged them."""
    labels: dict[str, str] = field(default_factory=dict)
    """How those names read in the description (the app's and the reports' labels); a name without one as it is."""


def generation_attributes(cell: CellSpec, seed: int) -> dict[str, Any]:
    """Span attributes every generation carries: which model, how it was asked, with which seed."""
    generation = cell.generation
    return {
        "model": cell.model.id, "backend": cell.model.backend, "weights": cell.model.weights,
        "quantization": cell.model.quantization, "prompt_setting": cell.prompt_setting, "condition": cell.condition,
        "seed": seed, "temperature": generation.temperature, "top_p": generation.top_p,
        "max_new_tokens": generation.max_new_tokens, "sweep": cell.sweep, "spec_hash": cell.spec_hash,
    }
