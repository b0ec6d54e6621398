"""One label map for the app and the reports: how a metric or column name reads (`at_avg` -> AtAvg,
`judge/<id>/qavg` -> `<id> QAvg`, `<id>:high_pct` -> `<id> High%`), and the Runs tab's optional column sets.

The names come from the registries and the data files, never from a list here: metric labels from the metrics
registry (`@metric(label=...)`), judge dimensions from the rubric files, the platform's own words from
reports/tables.yaml, and each study's words from its presentation (studies/<study>/tables.yaml, through the
Study interface). Two rubrics may name one dimension key differently (the infilling rubric's `coherence` is
"Bidirectional Coherence", the continuation example's "Coherence with the opening"): a dimension reads as the rubric
that scored it names it, so whatever shows a study's or a sweep's numbers passes its rubrics (`Study.own_rubrics`,
`sweep_rubrics`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from narrative_eval.judges import RUBRICS, load_rubric
from narrative_eval.metrics import METRICS
from narrative_eval.study import Presentation, Study, all_studies, load_presentation

PLATFORM_FILE = Path(__file__).with_name("tables.yaml")
"""The platform's own words, per-judge numbers, column sets and tables (those every sweep writes)."""

OTHER_SET = "Other numbers"
"""The column set of a logged number no set's pattern matches."""

SEED_METRIC = re.compile(r"^seed(?P<seed>\d+)/(?P<name>.+)$")
BRACKETED = re.compile(r"^(?P<head>[^\[\]]+)\[(?P<inside>[^\[\]]+)\]$")


class ColumnSet(BaseModel):
    """A named set of optional Runs-tab columns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """What the set is called in the app."""
    match: list[str]
    """Shell-style patterns of the logged names it takes (`judge/*`, `*_sd`)."""


class PlatformPresentation(Presentation):
    """reports/tables.yaml: a study's presentation plus what only the platform defines."""

    judge_labels: dict[str, str] = {}
    """Per-judge numbers (`judge/<id>/<name>`, report columns `<id>:<name>`) -> label, shown after the id."""
    prefix_labels: dict[str, str] = {}
    """Name prefixes (`cost` of `cost/usd_batch`) -> label."""
    suffix_labels: dict[str, str] = {}
    """Name endings (`_sd`, `_lo`, `_hi`) -> the word added after the label of the rest."""
    labelled_values: list[str] = []
    """Columns whose values are names too (a paired table's `metric`)."""
    column_sets: list[ColumnSet] = []
    """The Runs tab's optional column sets, in order; a name joins the first set that matches it."""
    counts: list[str] = []
    """Shell-style patterns of the logged names that count things: shown as whole numbers."""


def platform_presentation() -> PlatformPresentation:
    presentation = load_presentation(PLATFORM_FILE, PlatformPresentation)
    assert isinstance(presentation, PlatformPresentation)
    return presentation


def humanize(name: str) -> str:
    """A name no file labels, made readable: underscores as spaces, first letter capital."""
    text = name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class LabelMap:
    """Readable names of metric and column names."""

    names: Mapping[str, str]
    """Whole names -> labels (metrics, rubric dimensions, the platform's and the studies' words)."""
    judge: Mapping[str, str]
    """Per-judge numbers -> labels."""
    prefixes: Mapping[str, str]
    """Name prefixes -> labels."""
    suffixes: Mapping[str, str]
    """Name endings -> the word added after the label of the rest."""

    def __call__(self, name: str) -> str:
        """The label of a logged metric or a report column ('judge/j/qavg' -> 'j QAvg', 'at_avg_lo' -> 'AtAvg low')."""
        if name in self.names:
            return self.names[name]
        if name in self.judge:
            return self.judge[name]
        if seeded := SEED_METRIC.match(name):
            return f"{self(seeded['name'])} (seed {seeded['seed']})"
        head, slash, rest = name.partition("/")
        if slash and head == "judge" and "/" in rest:
            judge, _, number = rest.partition("/")
            return f"{judge} {self.judge_number(number)}"
        if slash and head in self.prefixes:
            owner, inner, number = rest.rpartition("/")
            number_label = self.judge_number(number) if inner else self(number)
            return " ".join(p for p in (self.prefixes[head], owner, number_label) if p)
        if (ending := self._suffix(name)) is not None:
            return f"{self(name[: -len(ending)])} {self.suffixes[ending]}"
        judge, colon, number = name.partition(":")
        if colon and judge and number:
            return f"{judge} {self.judge_number(number)}"
        if bracketed := BRACKETED.match(name):
            return f"{self(bracketed['head'])} ({bracketed['inside'].replace('|', ' vs ')})"
        return humanize(name)

    def judge_number(self, name: str) -> str:
        """The label of a per-judge number: QAvg, High%, a rubric dimension, 'checklist/<item>'."""
        if name in self.judge:
            return self.judge[name]
        if (ending := self._suffix(name)) is not None:
            return f"{self.judge_number(name[: -len(ending)])} {self.suffixes[ending]}"
        return self(name)

    def _suffix(self, name: str) -> str | None:
        return next((s for s in self.suffixes if name.endswith(s) and len(name) > len(s)), None)


def _dimension_labels(rubric_name: str) -> dict[str, str]:
    """Dimension key -> its label in one rubric (its facets' too)."""
    rubric = load_rubric(rubric_name)
    return {dimension.key: dimension.label or humanize(dimension.key)
            for dimension in (*rubric.dimensions, *rubric.facets)}


@cache
def label_map(rubrics: tuple[str, ...] = ()) -> LabelMap:
    """The label map of numbers scored under `rubrics` (built once per process and rubrics, plugins included): a judge
    dimension one of them has reads as the first that has it names it, whatever else names its key; any other reads
    as the registered rubrics name it, the shipped ones first (a plugin's rubric labels only the dimensions they
    lack)."""
    platform = platform_presentation()
    names = {entry.name: str(entry.meta.get("label") or entry.name) for entry in METRICS.entries()}
    for key, value in platform.labels.items():
        names.setdefault(key, value)
    for study in all_studies():
        for key, value in study.presentation().labels.items():
            names.setdefault(key, value)
    for entry in sorted(RUBRICS.entries(), key=lambda entry: entry.origin.startswith("plugin ")):
        for key, value in _dimension_labels(entry.name).items():
            names.setdefault(key, value)
    for rubric in reversed(rubrics):  # the first rubric that scored a dimension names it
        names.update(_dimension_labels(rubric))
    return LabelMap(names, platform.judge_labels, platform.prefix_labels, platform.suffix_labels)


def label(name: str, rubrics: tuple[str, ...] = ()) -> str:
    """How a metric or column name reads in the app and the reports, its judge dimensions as `rubrics` name them."""
    return label_map(rubrics)(name)


def labels(names: Sequence[str], rubrics: tuple[str, ...] = ()) -> dict[str, str]:
    """name -> label of each name (`label`); a label two names share keeps the later one's raw name beside it."""
    found: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        text = label(name, rubrics)
        found[name] = text if text not in taken else f"{text} ({name})"
        taken.add(found[name])
    return found


RUBRIC_PARAMS = ("params.rubric", "params.rubrics")
"""The cell-run params that name the rubrics its judges scored under: a single-turn cell's `rubric`, a multi-turn
cell's `rubrics` (names joined by commas)."""


def sweep_rubrics(study: Study | None, runs: Mapping[str, Iterable[object]] | None = None) -> tuple[str, ...]:
    """The rubrics a sweep's numbers were scored under, for their labels: the registered ones its cell runs (`runs`,
    as MLflow's search_runs frames them) logged in RUBRIC_PARAMS (a judge may name a rubric that is not the study's),
    then the study's own (`Study.own_rubrics`)."""
    registered = set(RUBRICS.names())
    logged = [value for param in RUBRIC_PARAMS if runs is not None and param in runs for value in runs[param]]
    names = [name for value in logged if isinstance(value, str) for name in value.split(",") if name in registered]
    return tuple(dict.fromkeys([*names, *(study.own_rubrics() if study is not None else ())]))


def column_set_names() -> list[str]:
    """The Runs tab's optional column sets, in order, then the set of everything else."""
    return [*(s.name for s in platform_presentation().column_sets), OTHER_SET]


def column_set_of(name: str) -> str:
    """The optional column set a logged name belongs to (the first whose pattern matches it)."""
    for column_set in platform_presentation().column_sets:
        if any(fnmatchcase(name, pattern) for pattern in column_set.match):
            return column_set.name
    return OTHER_SET


def is_count(name: str) -> bool:
    """Whether a logged name counts things (n_instances, n_seeds, requests_sync, a judge's n_judged): its value is a
    whole number, shown without decimals."""
    return any(fnmatchcase(name, pattern) for pattern in platform_presentation().counts)


def labelled_values() -> tuple[str, ...]:
    """Report columns whose values are names (labelled like column names)."""
    return tuple(platform_presentation().labelled_values)


__all__ = ["OTHER_SET", "LabelMap", "column_set_names", "column_set_of", "humanize", "label", "label_map",
           "labelled_values", "labels", "sweep_rubrics"]
