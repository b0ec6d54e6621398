"""Sweep configuration: YAML files, a catalog of named models and judges, and --set overrides."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, ValidationInfo, field_validator,
                      model_serializer, model_validator)

from narrative_eval.backends.base import BACKENDS
from narrative_eval.backends.batch import batchable
from narrative_eval.config_errors import Shorthand, config_problems, locate, located, yaml_error
from narrative_eval.errors import UserError, read_text
from narrative_eval.judges.checks import JudgeChecks
from narrative_eval.judges.rubric import RUBRICS
from narrative_eval.metrics import METRICS
from narrative_eval.records import GenerationParams, JudgeSpec, JurySpec, MetricsSpec, ModelSpec, SubsetSpec
from narrative_eval.study import STUDIES, Grid, StudyConfig, load_study

CATALOG_NAME = "models.yaml"
CATALOG_FOLDER = Path("experiments") / "configs"
"""Where the repository keeps the catalog, relative to the repository root (or the working directory)."""

MAX_SEED = 2**32 - 2
"""Largest seed a config may give. llama.cpp reads a seed as an unsigned 32-bit number: -1 becomes 4294967295,
which it takes as 'pick a random seed', and larger values wrap. Cell seeds are hashed into per-request engine
seeds, but judge seeds reach the engine as they are (plus the retry number), so one rule covers both."""

SEED_RULE = (f"integers from 0 to {MAX_SEED} (llama.cpp takes -1 and {MAX_SEED + 1} as 'a random seed' and wraps "
             "larger ones, so the run would not be reproducible)")
"""Why a seed is refused, as the error says it."""


CATALOG_ENTRY = Shorthand("a name from the model catalog", "names from the model catalog")
"""What a model or judge entry may be instead of a spec (load_config resolves it before validation)."""


def _section_model(study: Any) -> type[StudyConfig]:
    """The config section model of a study name (the empty one for a name no study has: that is reported apart)."""
    return STUDIES.get(study).config_section if isinstance(study, str) and study in STUDIES else StudyConfig


def grid_of(study: Any) -> Grid:
    """What a study's configs may give its grid keys: the `grid` its config section declares (none: Grid())."""
    return _section_model(study).grid


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
    """The study's data file (instances, tasks...)."""
    limit: int | None = None
    """Keep only the first N instances/tasks after subsetting."""
    subset: SubsetSpec | None = None
    """Stratified subset (per dataset x unit_idx) applied before the limit."""
    models: list[Annotated[ModelSpec, CATALOG_ENTRY]]
    """Generators: catalog names, or specs (a catalog name as `id` takes the catalog's entry, overridden by the keys
    given)."""
    prompt_settings: list[str]
    """The study's prompt settings (prompt levels and paradigms, system prompt names...): its names, and its default
    when left out (below, per study)."""
    conditions: list[str]
    """The study's conditions (delivery conditions...): its names, and its default when left out (below, per study)."""
    seeds: list[int] = Field(default_factory=lambda: [0])
    """Seeds run inside every cell."""
    generation: GenerationParams = GenerationParams()
    """Sampling settings."""
    judges: list[Annotated[JudgeSpec, CATALOG_ENTRY]] = Field(default_factory=list)
    """Judge panel: catalog names (a judge entry, or a model judging with the defaults), or specs."""
    judge_checks: Annotated[JudgeChecks, Shorthand("true or false", "true/false values")] = JudgeChecks()
    """Control items every judge judges once per sweep, after the cells (`false`: none); docs/judge-checks.md."""
    metrics: Annotated[MetricsSpec, Shorthand("a list of metric names", "lists of metric names")] = MetricsSpec()
    """Automatic metrics (of studies that score against a gold text); a list of names means `{names: [...]}`."""
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
    max_cost_usd: float | None = None
    """Refuse to start when the cells still to run may cost more than this many dollars (None: no budget)."""
    batch: bool = False
    """Send every hosted model's and judge's requests through the provider's batch API (`options.batch: true`)."""
    judge_repeats: int = Field(1, ge=1)
    """How many times every judge judges each output (a pair in each presentation order), each repeat with its own
    judge seed (a judge's own `repeats` wins); the verdict is the repeats' mean (a pairwise verdict: the one most
    repeats gave) and each cell logs the judge's agreement with itself (`<dimension>_self_alpha`; a pairwise judge
    its flip rate on the parent run). docs/judge-checks.md."""
    juries: list[JurySpec] = Field(default_factory=list)
    """Judges of the panel read as one, each under its own id: their verdicts on every output combined (mean, median
    or majority), no call of its own; reported wherever a judge is. A weighted jury (weights from its members'
    control checks) is combined after the checks, in the report's weighted_juries table. docs/judge-checks.md."""
    section: SerializeAsAny[StudyConfig] = Field(default_factory=StudyConfig)
    """The study's own keys (written at the top level of the YAML), validated by its section model; dumped back
    at the top level, so a logged config reads like the file."""

    @model_validator(mode="before")
    @classmethod
    def _gather_section(cls, data: Any) -> Any:
        """Move the keys the study's section model declares from the top level into `section`, and give the grid keys
        the config leaves out the study's defaults."""
        if not isinstance(data, dict):
            return data
        defaults = {key: list(choices.default) for key, choices in grid_of(data.get("study")).keys().items()}
        data = {**defaults, **data}
        if "section" in data or not isinstance(data.get("study"), str):
            return data
        keys = set(_section_model(data["study"]).model_fields)
        return {**{k: v for k, v in data.items() if k not in keys}, "section": {k: data[k] for k in keys if k in data}}

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        """`metrics: [rouge1, chrf]` is `metrics: {names: [rouge1, chrf]}`."""
        return {"names": value} if isinstance(value, list) else value

    @field_validator("section", mode="wrap")
    @classmethod
    def _validate_section(cls, value: Any, handler: Any, info: ValidationInfo) -> StudyConfig:
        model = _section_model(info.data.get("study"))
        return value if isinstance(value, model) else model.model_validate(value)

    @model_serializer(mode="wrap")
    def _flatten_section(self, handler: Any) -> dict[str, Any]:
        dumped = handler(self)
        return {**{k: v for k, v in dumped.items() if k != "section"}, **dumped.get("section", {})}

    @field_validator("study")
    @classmethod
    def _known_study(cls, name: str) -> str:
        return STUDIES.canonical(name)

    @model_validator(mode="after")
    def _study_names(self) -> SweepConfig:
        """Every prompt setting and condition is one of the study's (each problem at its key, with the study's
        names)."""
        problems = []
        for key, choices in grid_of(self.study).keys().items():
            names = choices.names(self) if choices.names is not None else None
            if names is None:
                continue
            known = list(dict.fromkeys(names))
            problems += [((key, index), f"{name!r} is not a {choices.what} of the {self.study} study (its "
                                        f"{choices.what}s: {', '.join(known) or 'none'})")
                         for index, name in enumerate(getattr(self, key)) if name not in known]
        if problems:
            raise located(type(self).__name__, problems)
        return self

    @model_validator(mode="after")
    def _registered_names(self) -> SweepConfig:
        """Every name the grid uses must be registered (plugins included); each unknown name is reported at its key
        (a study's own names at the config), with the names registered."""
        checks = [(("metrics", "names", index), METRICS, name) for index, name in enumerate(self.metrics.names or ())]
        checks += [(("judges", index, "rubric"), RUBRICS, judge.rubric)
                   for index, judge in enumerate(self.judges) if judge.rubric]
        checks += [((), registry, name) for registry, name in load_study(self.study).registered_names(self)]
        problems = [(loc, f"unknown {registry.kind} {name!r} (registered {registry.kind}s: "
                          f"{', '.join(registry.names())})") for loc, registry, name in checks if name not in registry]
        if problems:
            raise located(type(self).__name__, problems)
        return self

    @model_validator(mode="after")
    def _study_checks(self) -> SweepConfig:
        """What the study itself asks of its configs (every problem at once)."""
        problems = load_study(self.study).check_config(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _batch_everywhere(self) -> SweepConfig:
        """`batch: true` (or --batch) turns on batch mode for every hosted model and judge."""
        if not self.batch:
            return self

        def batched(spec: ModelSpec) -> ModelSpec:
            if not batchable(spec.backend) or spec.options.get("batch"):
                return spec
            return spec.model_copy(update={"options": {**spec.options, "batch": True}})

        self.models = [batched(m) for m in self.models]
        self.judges = [j.model_copy(update={"model": batched(j.model)}) for j in self.judges]
        return self

    @model_validator(mode="after")
    def _judge_repeats_everywhere(self) -> SweepConfig:
        """`judge_repeats: k` repeats every judge that names no `repeats` of its own."""
        if self.judge_repeats > 1:
            self.judges = [judge if "repeats" in judge.model_fields_set else
                           judge.model_copy(update={"repeats": self.judge_repeats}) for judge in self.judges]
        # A greedy judge on an engine whose greedy replies repeat would give the same verdict every time.
        same = [f"judge {judge.id!r} repeats {judge.repeats} times at temperature 0 on the {judge.model.backend} "
                "backend, whose greedy replies repeat bit for bit: every repeat would be the same verdict"
                for judge in self.judges if judge.repeats > 1 and judge.temperature == 0
                and judge.model.backend in BACKENDS and BACKENDS.get(judge.model.backend).repeats_greedy]
        if same:
            raise ValueError(f"{'; '.join(same)} (give it a temperature above 0, e.g. 0.7)")
        return self

    @model_validator(mode="after")
    def _juries_of_the_panel(self) -> SweepConfig:
        """A jury's members are two or more of the sweep's judges under one rubric; its id is its own."""
        judges = {judge.id: judge for judge in self.judges}
        problems = []
        seen: set[str] = set()
        for index, jury in enumerate(self.juries):
            if jury.id in judges or jury.id in seen:
                problems.append((("juries", index, "id"), f"{jury.id!r} is already a judge's or a jury's id"))
            seen.add(jury.id)
            unknown = [(j, member) for j, member in enumerate(jury.judges) if member not in judges]
            problems += [(("juries", index, "judges", j), f"{member!r} is not one of the sweep's judges (its judges: "
                                                          f"{', '.join(judges) or 'none'})") for j, member in unknown]
            if len(set(jury.judges)) < 2:
                problems.append((("juries", index, "judges"), "a jury needs two or more different judges"))
            rubrics = {judges[member].rubric for member in jury.judges if member in judges}
            if len(rubrics) > 1:
                problems.append((("juries", index, "judges"), "its judges must judge under one rubric, not "
                                                              f"{', '.join(sorted(str(r) for r in rubrics))}"))
            if jury.after_checks and not self.judge_checks.enabled:
                problems.append((("juries", index, "aggregate"), "a weighted jury's weights come from its members' "
                                                                 "control checks: turn judge_checks on"))
        if problems:
            raise located(type(self).__name__, problems)
        return self

    @field_validator("seeds")
    @classmethod
    def _seeds_in_range(cls, seeds: list[int]) -> list[int]:
        if not seeds:
            raise ValueError("a cell needs at least one seed (e.g. seeds: [0])")
        bad = [seed for seed in seeds if not 0 <= seed <= MAX_SEED]
        if bad:
            raise ValueError(f"must be {SEED_RULE}; got {', '.join(map(str, bad))}")
        return seeds

    @field_validator("limit")
    @classmethod
    def _positive_limit(cls, limit: int | None) -> int | None:
        if limit is not None and limit < 1:
            raise ValueError(f"must be a positive integer (how many instances or tasks to keep), got {limit}")
        return limit

    @field_validator("subset")
    @classmethod
    def _subset_keeps_some(cls, subset: SubsetSpec | None) -> SubsetSpec | None:
        if subset is not None and not 0 < subset.fraction <= 1:
            raise ValueError(f"fraction must be more than 0 and at most 1 (the share of each stratum kept), "
                             f"got {subset.fraction}")
        return subset

    @field_validator("judges")
    @classmethod
    def _judge_seeds_in_range(cls, judges: list[JudgeSpec]) -> list[JudgeSpec]:
        """A judge's retries use seed + 1 ... seed + max_retries, so the last of them must be a valid seed too."""
        bad = [f"judge {judge.id!r} has seed {judge.seed}"
               + (f" (its last retry {judge.seed + judge.max_retries})" if judge.seed >= 0 else "")
               for judge in judges if not 0 <= judge.seed <= MAX_SEED - max(judge.max_retries, 0)]
        if bad:
            raise ValueError(f"{'; '.join(bad)}: a judge's seed and its retries' seeds (seed + 1 ... seed + "
                             f"max_retries) must be {SEED_RULE}")
        return judges

    @field_validator("judges")
    @classmethod
    def _expected_scores_readable(cls, judges: list[JudgeSpec]) -> list[JudgeSpec]:
        """`scoring: expected` reads token log-probabilities, which only a backend declaring `score_logprobs` returns
        (an unknown backend is reported where the judge loads)."""
        bad = [f"judge {judge.id!r} asks for scoring: expected, but the {judge.model.backend} backend cannot return "
               "token log-probabilities" for judge in judges if judge.scoring == "expected"
               and judge.model.backend in BACKENDS and not BACKENDS.get(judge.model.backend).score_logprobs]
        if bad:
            able = sorted(name for name in BACKENDS.names() if BACKENDS.get(name).score_logprobs)
            raise ValueError(f"{'; '.join(bad)} (backends that can: {', '.join(able)})")
        return judges

    @field_validator("models")
    @classmethod
    def _unique_ids(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        ids = [m.id for m in models]
        if len(ids) != len(set(ids)):
            raise ValueError(f"model ids must be unique, got {ids}")
        return models

    def resolved_report_dir(self) -> Path:
        """reports/<sweep>/, or reports/<sweep>-<data key>/ when that folder holds a same-named sweep's report on other data."""
        return claim_report_dir(Path(self.report_dir.format(sweep=self.sweep)), self.data_key())

    def data_key(self) -> str:
        """Short digest of the input files: two sweeps of one name on different data get different report folders."""
        digest = hashlib.sha256()
        for name in (self.data, *self.section.input_files()):
            if name and Path(name).is_file():
                digest.update(hashlib.sha256(Path(name).read_bytes()).digest())
        return digest.hexdigest()[:8]


REPORT_KEY_FILE = ".data-key"
"""Marker in a report folder: the data key of the sweep that writes there."""


def default_grid_names(study: str) -> dict[str, tuple[list[str] | None, tuple[str, ...]]]:
    """Grid key -> (the names a config of `study` that keeps every default may give it, its default): what
    `experiments.sweep --list` shows of each study. None where the study takes any name (it checks them itself)."""
    grid = grid_of(study)
    config = SweepConfig.model_construct(study=study, extra={}, prompt_settings=list(grid.prompt_settings.default),
                                         conditions=list(grid.conditions.default), section=_section_model(study)())
    return {key: (None if choices.names is None else list(choices.names(config) or []), choices.default)
            for key, choices in grid.keys().items()}


def claim_report_dir(base: Path, key: str) -> Path:
    """The report folder for a sweep's data: base when free or already its own, else base-<key>; marked as claimed."""
    chosen = base
    marker = base / REPORT_KEY_FILE
    if marker.is_file() and marker.read_text().strip() != key:
        chosen = base.with_name(f"{base.name}-{key}")
    chosen.mkdir(parents=True, exist_ok=True)
    (chosen / REPORT_KEY_FILE).write_text(key + "\n")
    return chosen


def parse_override(text: str) -> tuple[list[str], Any]:
    """'a.b=value' -> (['a', 'b'], YAML-parsed value); a UserError for anything else."""
    key, sep, raw = text.partition("=")
    path = [part.strip() for part in key.split(".")]
    if not sep or not all(path):
        raise UserError(f"--set {text!r}: expected KEY=VALUE with a (dotted) key, e.g. --set generation.temperature=0.5")
    try:
        return path, yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise UserError(f"--set {text!r}: the value is not valid YAML ({getattr(error, 'problem', None) or error})") from None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply every --set; all bad ones are reported together."""
    problems: list[str] = []
    for text in overrides:
        try:
            path, value = parse_override(text)
        except UserError as error:
            problems.extend(error.problems)
            continue
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {}) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                problems.append(f"--set {text!r}: {'.'.join(path[: depth + 1])} is not a mapping")
                break
            node = child
        else:
            node[path[-1]] = value
    if problems:
        raise UserError(problems)
    return data


def default_catalog(config_path: str | Path | None = None) -> Path | None:
    """The model catalog used when none is named: next to the config if there is one there, else the repository's.

    The repository's is found from the working directory (experiments/configs/models.yaml) or from
    where this package lives (an editable install sits in the repository), so a config kept anywhere
    (/tmp, a home folder) still names the catalog's models.
    """
    candidates = []
    if config_path is not None:
        candidates.append(Path(config_path).resolve().parent / CATALOG_NAME)
    candidates.append(Path.cwd() / CATALOG_FOLDER / CATALOG_NAME)
    candidates.append(Path(__file__).resolve().parents[2] / CATALOG_FOLDER / CATALOG_NAME)
    return next((path for path in candidates if path.is_file()), None)


def load_catalog(path: str | Path | None) -> dict[str, dict[str, Any]]:
    if path is None or not Path(path).exists():
        return {"models": {}, "judges": {}}
    try:
        data = yaml.safe_load(read_text(path, "model catalog")) or {}
    except yaml.YAMLError as error:
        raise UserError(yaml_error(path, error)) from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a model catalog is a mapping with 'models' and 'judges'")
    return {"models": data.get("models", {}) or {}, "judges": data.get("judges", {}) or {}}


def _unknown(kind: str, name: str, catalog: dict[str, Any]) -> UserError:
    known = ", ".join(sorted(catalog["models"])) or "none"
    where = catalog.get("path") or "no catalog found; pass --catalog FILE"
    return UserError(f"{kind} {name!r} is not in the model catalog ({where}); known: {known}")


def resolve_model(entry: Any, catalog: dict[str, Any]) -> dict[str, Any]:
    if isinstance(entry, str):
        if entry not in catalog["models"]:
            raise _unknown("model", entry, catalog)
        return {"id": entry, **catalog["models"][entry]}
    if isinstance(entry, dict) and "weights" not in entry and entry.get("id") in catalog["models"]:
        return {**catalog["models"][entry["id"]], **entry}
    return entry


def resolve_judge(entry: Any, catalog: dict[str, Any]) -> dict[str, Any]:
    if isinstance(entry, str):
        if entry in catalog["judges"]:
            entry = {"id": entry, **catalog["judges"][entry]}
        elif entry in catalog["models"]:
            entry = {"id": entry, "model": entry}
        else:
            raise _unknown("judge", entry, catalog)
    if not isinstance(entry, dict) or "id" not in entry:
        return entry  # the schema check reports it
    entry = dict(entry)
    entry["model"] = resolve_model(entry.get("model", entry["id"]), catalog)
    return entry


def _resolve_all(raw: dict[str, Any], key: str, resolve, catalog: dict[str, Any], problems: list[tuple]) -> None:
    """Resolve every entry of raw[key], collecting (location, message) for each unknown name."""
    entries = raw.get(key) or []
    if not isinstance(entries, list):
        return  # the schema check reports it
    resolved = []
    for index, entry in enumerate(entries):
        try:
            resolved.append(resolve(entry, catalog))
        except UserError as error:
            problems.extend(((key, index), message) for message in error.problems)
            resolved.append(entry)
    raw[key] = resolved


def _read_raw(path: Path, overrides: list[str]) -> tuple[str, dict[str, Any]]:
    text = read_text(path, "config file")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise UserError(yaml_error(path, error)) from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}:1: a sweep config is a YAML mapping (study, sweep, data, models, ...)")
    return text, apply_overrides(raw, overrides)


def _flat_problems(error: ValidationError, study: Any) -> list[tuple[tuple, str]]:
    """config_problems with the study section's keys read against its model and located where the YAML has them: at
    the top level."""
    return config_problems(error, SweepConfig, {"section": _section_model(study)})


def load_config(
    path: str | Path,
    overrides: list[str] | None = None,
    *,
    data: str | None = None,
    limit: int | None = None,
    catalog: str | Path | None = None,
) -> SweepConfig:
    """Read a sweep config, apply --set overrides and flags, and resolve catalog names.

    Every problem (unknown model or judge, unknown or invalid key) is raised at once as a
    UserError, each located as config:line where the YAML says it.
    """
    path = Path(path)
    text, raw = _read_raw(path, overrides or [])
    flags: dict[str, str] = {}  # config keys a command-line flag set, so a problem names the flag
    if data is not None:
        raw["data"] = data
        flags["data"] = f"--data {data}"
    if limit is not None:
        raw["limit"] = limit
        flags["limit"] = f"--limit {limit}"
    catalog_path = Path(catalog) if catalog is not None else default_catalog(path)
    if catalog is not None and not catalog_path.is_file():
        raise UserError(f"{catalog_path}: model catalog not found")
    catalog_data = {**load_catalog(catalog_path), "path": str(catalog_path) if catalog_path else None}
    problems: list[tuple] = []
    _resolve_all(raw, "models", resolve_model, catalog_data, problems)
    _resolve_all(raw, "judges", resolve_judge, catalog_data, problems)
    if raw.get("judges") is None:
        raw["judges"] = []
    try:
        config = SweepConfig.model_validate(raw)
    except ValidationError as error:
        reported = {loc for loc, _ in problems}  # an unknown name is not also "not a valid ModelSpec"
        problems.extend((loc, message) for loc, message in _flat_problems(error, raw.get("study"))
                        if loc[:2] not in reported)
        config = None
    if problems:
        raise UserError([locate(path, text, loc, message, overrides or [], flags) for loc, message in problems])
    return config
