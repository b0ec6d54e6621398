"""What a study plugs into the sweep: the Study interface and its registry, its config section (StudyConfig), its
report commands (ReportCommand), what a cell gets from its surroundings (Runtime) and what it gives back
(CellResult), and how its numbers read (Presentation, from its package's tables.yaml). The studies themselves
live in `studies/`, one package each; generic code (the sweep, config loading, the report command, tracing, the
app's Runs and Figures tabs) reaches a study only through this interface."""

from __future__ import annotations

import argparse
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.judges.checks import ControlSet
from narrative_eval.judges.rubric import RUBRICS, load_rubric
from narrative_eval.metrics import METRICS
from narrative_eval.records import FIRST_VERSION, CellSpec, JudgeSpec, ModelSpec
from narrative_eval.registry import Registry
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.tracing import CellEvaluation, CellRecords

ProgressFactory = Callable[[Iterable[Any], str, int | None], Iterable[Any]]

STUDIES: Registry[type[Study]] = Registry("study")
"""Study name -> Study class; entries carry the MLflow `experiment` the study logs to. The project's own studies
register through its entry points (pyproject.toml), exactly as a plugin's study does."""


def study(name: str, *, experiment: str | None = None, aliases: Iterable[str] = ()):
    """Register a Study subclass; its runs go to MLflow experiment `experiment` (default: the name)."""

    def register(study_class: type[Study]) -> type[Study]:
        study_class.name = name
        study_class.experiment = experiment or name
        STUDIES.add(name, study_class, aliases=aliases, experiment=study_class.experiment)
        return study_class

    return register


def code_versions(study_name: str, metric_names: Iterable[str]) -> dict[str, str]:
    """What a cell's spec records of the code that makes its numbers (`CellSpec.versions`, part of its hash): the
    study's and each metric's version where it is not the first, and for a plugin's study or metric always the
    installed distribution's name and version too (`Entry.distribution`), so a changed plugin is new cells."""
    versions: dict[str, str] = {}
    found = [("study", STUDIES.entry(study_name)), *((f"metric/{name}", METRICS.entry(name)) for name in metric_names)]
    for key, entry in found:
        version = int(getattr(entry.target, "version", FIRST_VERSION))
        parts = ([] if version == FIRST_VERSION else [f"version {version}"]) + (
            [entry.distribution] if entry.distribution else [])
        if parts:
            versions[key] = ", ".join(parts)
    return versions


def load_study(name: str) -> Study:
    """An instance of the study registered under `name` (or one of its aliases)."""
    return STUDIES.get(name)()


def experiment_of(name: str) -> str:
    """The MLflow experiment of a study name or alias."""
    return STUDIES.entry(name).meta["experiment"]


def all_studies() -> list[Study]:
    """An instance of every registered study (plugins included), in registry order."""
    return [entry.target() for entry in STUDIES.entries()]


def study_of_experiment(experiment: str) -> Study | None:
    """The study whose runs go to MLflow experiment `experiment` (None for an experiment no study owns)."""
    return next((study for study in all_studies() if study.experiment == experiment), None)


STANDARD: str = CellSpec.model_fields["condition"].default
"""The one value of a grid key a study declares no names for: a cell's condition when the study has none (run names
leave it out), and its prompt setting when the study names none."""


@dataclass(frozen=True)
class Choices:
    """The names one grid key of a study's configs may hold (`prompt_settings` or `conditions`), and its default."""

    what: str
    """What one of them is called in messages and the config reference ('prompt setting', 'condition')."""
    default: tuple[str, ...]
    """The key's value when a config leaves it out."""
    names: Callable[[Any], Iterable[str] | None] | None
    """The names a config (the sweep's SweepConfig) may give, from the config itself (a prompt file it names brings
    its own; None when that cannot be told yet: a missing file is reported apart); None: any name (the study checks
    them in its check_config)."""
    meaning: str
    """Which names these are, for the config reference (docs/config.md)."""


@dataclass(frozen=True)
class Grid:
    """The study's words for the two grid keys whose values are its own, declared on its config section as
    `grid: ClassVar[Grid] = Grid(...)`: a name that is not the study's is an error naming the key and its names."""

    prompt_settings: Choices = field(default_factory=lambda: Choices(
        "prompt setting", (STANDARD,), None, f"any name (the study checks them itself); default `{STANDARD}`"))
    """Its prompt settings; a study that declares none takes any name."""
    conditions: Choices = field(default_factory=lambda: Choices(
        "condition", (STANDARD,), lambda config: (STANDARD,), f"none: the one condition `{STANDARD}`"))
    """Its conditions; a study that declares none has the one condition `standard`."""

    def keys(self) -> dict[str, Choices]:
        """Config key -> what it may hold."""
        return {"prompt_settings": self.prompt_settings, "conditions": self.conditions}


class StudyConfig(BaseModel):
    """A study's own section of a sweep config. Its keys are written at the top level of the YAML beside the
    generic ones (`constraints:`, `pairwise_judges:` ...); SweepConfig validates them with the section model
    of the config's study."""

    model_config = ConfigDict(extra="forbid")

    grid: ClassVar[Grid] = Grid()
    """Its words for the grid keys `prompt_settings` and `conditions` (none declared: any prompt setting, the one
    condition `standard`)."""

    def cell_extra(self) -> dict[str, Any]:
        """What every cell's spec carries in `extra` from this section (part of the spec hash)."""
        return {}

    def input_files(self) -> list[str]:
        """Files besides `data` whose contents key the sweep's report folder (with the data file's)."""
        return []

    def required_files(self) -> dict[str, str | None]:
        """What each file this section names is -> its path (None: not given); the sweep checks they exist."""
        return {}


@dataclass(frozen=True)
class ReportCommand:
    """One subcommand of `python -m experiments.report`: its name, its arguments and what it writes."""

    name: str
    """Subcommand name."""
    help: str
    """One line for --help."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the subcommand's own arguments."""
    run: Callable[[argparse.Namespace, str | None], dict[str, str]]
    """Writes the tables from the parsed arguments and the --data file's sha256 (None when not given); returns
    title -> markdown."""
    aliases: tuple[str, ...] = ()
    """Other names of the subcommand."""
    files: tuple[tuple[str, str], ...] = ()
    """(argument dest, what it is) of every input file it names, checked to exist before it runs."""


def sweep_arguments(parser: argparse.ArgumentParser, study_name: str) -> None:
    """--sweep, --out and --data, the arguments every report of a sweep takes."""
    parser.add_argument("--sweep", required=True, help="sweep name (the parent run)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--data", help=f"report only the cells run on this data file (when the {study_name} sweep "
                                       "name was reused on other data)")


def rubric_templates(names: Iterable[str]) -> dict[str, str | list[dict[str, str]]]:
    """Prompt-registry name (`rubric.<file stem>`) -> the chat template of each named rubric, in name order."""
    templates: dict[str, str | list[dict[str, str]]] = {}
    for name in sorted(set(names)):
        rubric = load_rubric(name)
        templates[f"rubric.{Path(rubric.name).stem}"] = [{"role": "system", "content": rubric.system},
                                                         {"role": "user", "content": rubric.user}]
    return templates


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


TABLES_FILE = "tables.yaml"
"""A study's presentation file, in its package folder beside the module that registers it."""


class ReportTable(BaseModel):
    """One table of a report as the papers present it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    """File stem in the report folder (`<file>.csv`); `{judge}` stands for a judge id (one table per judge)."""
    title: str
    """Its title; `{judge}` is filled in."""
    caption: str
    """One line: what the table shows and how to read it."""
    source: str = ""
    """Where the papers show it ('Table 3'), when they do."""
    interval: str | None = None
    """The column its plain `lo` and `hi` columns bound, for tables that name them so."""


class Presentation(BaseModel):
    """How a study's numbers read: readable names of its own words, and its report's tables in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labels: dict[str, str] = {}
    """Its own metric, column and condition names -> how tables and the app name them."""
    tables: list[ReportTable] = []
    """Its report's tables in the papers' order, main table first."""


@cache
def load_presentation(path: Path, model: type[Presentation] = Presentation) -> Presentation:
    """A presentation file (tables.yaml) read into `model`; a missing file presents nothing, a malformed one
    raises ValueError naming it and the field."""
    if not path.is_file():
        return model()
    try:
        return model.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    except (yaml.YAMLError, ValidationError) as error:
        raise ValueError(f"{path}: {error}") from error


class RequestCount(NamedTuple):
    """Requests a step may send to one model: for dry-run counts, cost estimates and the failure budget."""

    model: ModelSpec
    """The model they go to."""
    requests: int
    """How many (an upper bound)."""
    max_new_tokens: int
    """The token limit of each."""


AfterSweepRequests = list[RequestCount]
"""What a study's after-sweep steps (or its judges' control items) may send, model by model."""


class SweepSettings(Protocol):
    """What a study reads of a sweep's config (config.SweepConfig, which sits above this layer, satisfies it)."""

    sweep: str
    """The sweep's name."""
    data: str
    """Its data file."""
    limit: int | None
    subset: Any
    """Its stratified subset (SubsetSpec), or None."""
    prompt_settings: list[str]
    conditions: list[str]
    seeds: list[int]
    judges: list[JudgeSpec]
    section: StudyConfig
    """The study's own config section (an instance of its `config_section`)."""


class Study(ABC):
    """A study: its MLflow experiment, its config section, its cell runner and request counts, its cells' MLflow
    records (traces, prompt versions, headline metrics), its after-sweep steps and its reports.

    Required: `count_requests`, `run_cell` and `summarise`. Every other method is an optional hook, grouped below
    by purpose (the config, running a cell, what a cell logs, judge control checks, after the cells, reports). A
    study whose items each get one prompt is declared instead (`evaluation.SingleTurnStudy`): the library runs
    its cells and fills these in from the declaration."""

    name: str
    """Registry name (set by @study)."""
    experiment: str
    """MLflow experiment its runs go to (set by @study)."""
    config_section: type[StudyConfig] = StudyConfig
    """The model of its own config keys (none by default)."""
    metrics: tuple[str, ...] | None = None
    """The automatic metrics its cells compute when a config names none (registered names; a plugin registers its own
    with `@metric`); None: the project's own metrics (BERTScore, ROUGE-1, METEOR, chrF, Sem-F1), never a plugin's."""
    published_reference: tuple[str, str] | None = None
    """(reference name under data/reference/, source) of published rows the Runs tab can show beside its runs."""
    after_sweep_stage: str = "after-sweep steps"
    """What its after-sweep steps are called where a sweep's progress is shown (when it overrides `after_sweep`)."""
    version: ClassVar[int] = FIRST_VERSION
    """Version of the code that makes its numbers (how it reads answers, scores, aggregates): raise it when a change
    gives other numbers, so its finished cells become new cells instead of being skipped (`code_versions`)."""

    # ------------------------------------------------------------------ required

    @abstractmethod
    def count_requests(self, cell: CellSpec) -> int:
        """Generation requests of one seed of a cell (for dry runs and cost estimates)."""

    @abstractmethod
    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        """Run one cell: generate, score, judge; return what its MLflow run logs."""

    @abstractmethod
    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        """Write the sweep's tables/figures to out_dir from its cells on `data_sha256` (all, when None); return
        title -> markdown table for the terminal."""

    # ------------------------------------------------------------------ the config

    def registered_names(self, config: SweepSettings) -> list[tuple[Registry, str]]:
        """(registry, name) of every name the config uses that this study looks up (conditions, prompt settings,
        rubrics of its section); unknown ones are reported together with the generic ones."""
        return []

    def check_config(self, config: SweepSettings) -> list[str]:
        """What is wrong with a config of this study beyond its schema and names (empty when nothing)."""
        return []

    def plan_warnings(self, cells: Sequence[CellSpec]) -> list[str]:
        """What the dry run warns of in a grid of this study that may run but likely not as meant (a token limit
        below what its prompts ask for...); none by default."""
        return []

    def registries(self) -> list[Registry]:
        """Registries of its own (its conditions...), listed by `experiments.sweep --list` beside the generic ones."""
        return []

    # ------------------------------------------------------------------ running a cell

    def count_judged(self, cell: CellSpec) -> int:
        """Judge requests of one seed and one judge of a cell; by default one per generation request."""
        return self.count_requests(cell)

    def progress_stages(self, cell: CellSpec) -> list[str]:
        """The stages `run_cell` reports to `runtime.progress`, in order, each named by its description after the
        cell's run name ('<run name>: generate' -> 'generate'); shown ahead in the app and weighed equally in its
        progress bar. Empty (the default) when they cannot be told in advance: the app shows them as they come."""
        return []

    # ------------------------------------------------------------------ what a cell logs beside its metrics

    def headline_metrics(self, judges: Sequence[str]) -> list[str]:
        """Names of the metrics its cells log that the Runs tab and run descriptions show first, in order, for a
        sweep judged by `judges` (ids)."""
        return []

    def headline_labels(self, names: Sequence[str]) -> dict[str, str]:
        """How its headline metrics read in a run's description (name -> label); none: they show as named. (The
        label map, reports.labels, sits above this layer: a study package passes it on.)"""
        return {}

    def evaluation(self, cell: CellSpec, result: CellResult) -> CellEvaluation:
        """What tracing writes for a finished cell beside its metrics: records, prompts, headline metrics."""
        headline = self.headline_metrics(cell.judge_ids)
        return CellEvaluation(self.cell_records(cell, result), self.used_templates(cell, result), headline,
                              self.headline_labels(headline))

    def cell_records(self, cell: CellSpec, result: CellResult) -> CellRecords | None:
        """A finished cell's traces and dataset input (None: it logs none)."""
        return None

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, str | list[dict[str, str]]]:
        """Prompt-registry name -> template of every prompt and rubric the cell used; by default its judges' rubrics
        and those its result names in the `rubric` param."""
        names = {j.rubric for j in cell.judges if j.rubric} | {
            name for name in str(result.params.get("rubric", "")).split(",") if name}
        return rubric_templates(names)

    def presentation(self) -> Presentation:
        """How its numbers read: the tables.yaml in its package folder (labels of its own words, its report's
        tables in the papers' order); a study without one presents its tables under their file names."""
        return load_presentation(Path(inspect.getfile(type(self))).with_name(TABLES_FILE))

    def own_rubrics(self) -> tuple[str, ...]:
        """The registered rubrics of its package (files beside its study module or in its `rubrics/` folder), in
        registration order: its judges' dimensions read as these name them in its tables and the app
        (reports.labels), where another study's rubric names the same key otherwise."""
        folder = Path(inspect.getfile(type(self))).resolve().parent
        return tuple(entry.name for entry in RUBRICS.entries()
                     if Path(entry.target).parent in (folder, folder / "rubrics"))

    # ------------------------------------------------------------------ judge control checks (judges.checks)

    def control_items(self, config: SweepSettings, cells: Sequence[CellSpec], judge: JudgeSpec, k: int) -> list[ControlSet]:
        """The control items `judge` judges once per sweep, after the cells, built from `k` instances (tasks) of the
        sweep's data and what its finished `cells` wrote; the same instances for every judge. None by default."""
        return []

    def control_requests(self, config: SweepSettings, cells: Sequence[CellSpec], k: int) -> AfterSweepRequests:
        """What judging every judge's control items may send, for dry runs, cost estimates and the budget (an upper
        bound); by default counted from `control_items` (a study whose controls need the cells' outputs counts
        them itself)."""
        return [RequestCount(group.judge.model, group.requests, group.judge.max_new_tokens)
                for judge in config.judges for group in self.control_items(config, cells, judge, k)]

    # ------------------------------------------------------------------ after the cells

    def after_sweep_requests(self, config: SweepSettings, cells: Sequence[CellSpec]) -> AfterSweepRequests:
        """What its after-sweep steps may send, for dry runs, cost estimates and the budget (an upper bound)."""
        return []

    def after_sweep(self, config: SweepSettings, out_dir: Path, data_sha256: str,
                    backend_for: Callable[[ModelSpec], Any]) -> dict[str, str]:
        """Steps that need every cell finished (pairwise judging across cells), run after `summarise`, with the
        sweep's config and the backends behind its request cache; title -> markdown of what they wrote."""
        return {}

    # ------------------------------------------------------------------ reports

    def report_commands(self) -> list[ReportCommand]:
        """Its subcommands of `python -m experiments.report`; by default one, named after the study, that runs
        `summarise` for --sweep NAME --out DIR [--data FILE]."""
        return [ReportCommand(
            name=self.name, help=f"tables and figures of a {self.name} sweep, from MLflow",
            add_arguments=lambda parser: sweep_arguments(parser, self.name),
            run=lambda args, data_sha256: self.summarise(args.sweep, Path(args.out), data_sha256=data_sha256),
            files=(("data", "data file"),))]

    def anchored_outputs(self, sweep: str, data_sha256: str | None = None,
                         ratings: str | Path | None = None) -> list[AnchoredOutputs] | None:
        """A sweep's outputs with each judge's scores and people's ratings so far (`ratings`: a file of them in the
        study's own format; else where the study keeps them), one per judge: what `python -m experiments.report
        rating-plan` plans from. None (the default): the study's outputs are not rated by people."""
        return None

    # ------------------------------------------------------------------ the app

    def live_form(self) -> Any:
        """The form the app's Fill live tab shows for it (a `studies.live.LiveForm`); None (the default): the form a
        single-turn study's declaration gives, one box per slot of the setting's user template and one for its
        reference."""
        return None

    def viewers(self) -> list[Any]:
        """Views of its runs the app shows in tabs of their own, after the generic ones (a
        `studies.viewers.ConversationView`: the incremental study's Conversations); none by default."""
        return []
