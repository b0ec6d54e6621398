"""Sweep configuration: YAML files, a catalog of named models and judges, and --set overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from narrative_eval.records import GenerationParams, JudgeSpec, MetricsSpec, ModelSpec, SubsetSpec

CATALOG_NAME = "models.yaml"


class SweepConfig(BaseModel):
    """A sweep: a grid of models x prompt settings x conditions, with seeds and judges inside each cell."""

    model_config = ConfigDict(extra="forbid")

    study: str
    """Which study's cell runner and report to use: a registered study name or alias (stored canonical)."""
    sweep: str
    """Sweep name: the parent run's name, and the key that makes reruns resume."""
    description: str = ""
    """What the sweep reproduces."""
    data: str
    """Instances file (infilling) or tasks JSON (incremental-delivery)."""
    constraints: str | None = None
    """Constraints JSONL (incremental-delivery)."""
    limit: int | None = None
    """Keep only the first N instances/tasks after subsetting."""
    subset: SubsetSpec | None = None
    """Stratified subset (per dataset x unit_idx) applied before the limit."""
    models: list[ModelSpec]
    """Generators."""
    prompt_settings: list[str] = Field(default_factory=lambda: ["L2"])
    """Prompt levels / paradigms (infilling) or system prompt names (incremental-delivery)."""
    prompt_file: str | None = None
    """Alternative prompt settings file (defaults to the packaged one)."""
    conditions: list[str] = Field(default_factory=lambda: ["standard"])
    """Delivery conditions (incremental-delivery); 'standard' for infilling."""
    seeds: list[int] = Field(default_factory=lambda: [0])
    """Seeds run inside every cell."""
    generation: GenerationParams = GenerationParams()
    """Sampling settings."""
    judges: list[JudgeSpec] = Field(default_factory=list)
    """Judge panel."""
    metrics: MetricsSpec = MetricsSpec()
    """Automatic metrics (infilling)."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Study-specific settings passed to every cell."""
    executor: str = "local"
    """Cell executor: local or ray."""
    executor_options: dict[str, Any] = Field(default_factory=dict)
    """Executor settings (ray address, resources per cell, retries)."""
    cache: str | None = None
    """Request cache file (default .cache/requests.sqlite or NARRATIVE_EVAL_CACHE)."""
    report_dir: str = "reports/{sweep}"
    """Where the sweep's tables and figures are written."""
    failure_budget: float | None = None
    """Stop the sweep when more than this share of a cell's requests fail (None: never stop)."""

    @field_validator("study")
    @classmethod
    def _known_study(cls, name: str) -> str:
        from narrative_eval.studies.base import STUDIES

        return STUDIES.canonical(name)

    @model_validator(mode="after")
    def _registered_names(self) -> SweepConfig:
        """Every name the grid uses must be registered (plugins included); all unknown names are reported at once."""
        from narrative_eval.delivery.conditions import CONDITIONS
        from narrative_eval.judges.rubric import RUBRICS
        from narrative_eval.metrics import METRICS
        from narrative_eval.prompts.render import PROMPT_SETTINGS

        checks = [(METRICS, name) for name in self.metrics.names or ()]
        checks += [(RUBRICS, judge.rubric) for judge in self.judges if judge.rubric]
        if self.study == "incremental-delivery":
            checks += [(CONDITIONS, name) for name in self.conditions]
        elif self.prompt_file is None:
            checks += [(PROMPT_SETTINGS, name) for name in self.prompt_settings]
        problems = [f"unknown {registry.kind} {name!r}" for registry, name in checks if name not in registry]
        if problems:
            kinds = {registry.kind: registry for registry, _ in checks}
            known = "; ".join(f"{kind}s: {', '.join(registry.names())}" for kind, registry in kinds.items())
            raise ValueError(f"{', '.join(problems)} (registered {known})")
        return self

    @field_validator("models")
    @classmethod
    def _unique_ids(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        ids = [m.id for m in models]
        if len(ids) != len(set(ids)):
            raise ValueError(f"model ids must be unique, got {ids}")
        return models

    def resolved_report_dir(self) -> Path:
        return Path(self.report_dir.format(sweep=self.sweep))


def parse_override(text: str) -> tuple[list[str], Any]:
    """'a.b=value' -> (['a', 'b'], YAML-parsed value)."""
    if "=" not in text:
        raise ValueError(f"--set expects key=value, got {text!r}")
    key, _, raw = text.partition("=")
    return key.strip().split("."), yaml.safe_load(raw)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return data


def load_catalog(path: str | Path | None) -> dict[str, dict[str, Any]]:
    if path is None or not Path(path).exists():
        return {"models": {}, "judges": {}}
    data = yaml.safe_load(Path(path).read_text()) or {}
    return {"models": data.get("models", {}) or {}, "judges": data.get("judges", {}) or {}}


def _resolve_model(entry: Any, catalog: dict[str, Any]) -> dict[str, Any]:
    if isinstance(entry, str):
        if entry not in catalog["models"]:
            raise ValueError(f"model {entry!r} is not in the catalog; known: {', '.join(sorted(catalog['models']))}")
        return {"id": entry, **catalog["models"][entry]}
    if isinstance(entry, dict) and "weights" not in entry and entry.get("id") in catalog["models"]:
        return {**catalog["models"][entry["id"]], **entry}
    return entry


def _resolve_judge(entry: Any, catalog: dict[str, Any]) -> dict[str, Any]:
    if isinstance(entry, str):
        if entry in catalog["judges"]:
            entry = {"id": entry, **catalog["judges"][entry]}
        elif entry in catalog["models"]:
            entry = {"id": entry, "model": entry}
        else:
            raise ValueError(f"judge {entry!r} is in neither the judges nor the models catalog")
    entry = dict(entry)
    entry["model"] = _resolve_model(entry.get("model", entry["id"]), catalog)
    return entry


def load_config(
    path: str | Path,
    overrides: list[str] | None = None,
    *,
    data: str | None = None,
    limit: int | None = None,
    catalog: str | Path | None = None,
) -> SweepConfig:
    """Read a sweep config, apply --set overrides and flags, and resolve catalog names."""
    path = Path(path)
    raw = yaml.safe_load(path.read_text()) or {}
    raw = apply_overrides(raw, overrides or [])
    if data is not None:
        raw["data"] = data
    if limit is not None:
        raw["limit"] = limit
    catalog_data = load_catalog(catalog or path.parent / CATALOG_NAME)
    raw["models"] = [_resolve_model(m, catalog_data) for m in raw.get("models", [])]
    raw["judges"] = [_resolve_judge(j, catalog_data) for j in raw.get("judges", []) or []]
    return SweepConfig.model_validate(raw)
