"""The incremental-delivery study's own config keys (the constraints file and the end-of-sweep pairwise judges), and
its words for the grid: its system prompts and its delivery conditions."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from narrative_eval.config_errors import Shorthand
from narrative_eval.data.files import file_sha256
from narrative_eval.judges import load_rubric
from narrative_eval.judges.rubric import RUBRICS
from narrative_eval.multi_turn import MultiTurnConfig
from narrative_eval.prompts.render import PROMPT_SETTINGS, SYSTEM_PROMPT
from narrative_eval.records import JudgeSpec
from narrative_eval.registry import Registry
from narrative_eval.studies.incremental.turns import CONDITIONS, DEFAULT_SYSTEM_PROMPTS_FILE, load_system_prompt
from narrative_eval.studies.incremental.vocabulary import (FULL, PAIR_CONDITIONS, PAIRWISE_DIMENSIONS, RECAP, SHARDED,
                                                           SNOWBALL)
from narrative_eval.study import Choices, Grid

DEFAULT_SYSTEM_PROMPT = "default"
"""The system prompt of a config that names none: the published study's."""


def system_prompt_names(config: Any) -> list[str]:
    """The registered system prompts (a plugin's too), and every prompt setting of the config that reads as one: a
    name in its `extra.system_prompts_file`, or a .txt/.md file holding the prompt itself."""
    registered = [entry.name for entry in PROMPT_SETTINGS.entries() if entry.meta.get("template") == SYSTEM_PROMPT]
    path = config.extra.get("system_prompts_file", DEFAULT_SYSTEM_PROMPTS_FILE)

    def readable(name: str) -> bool:
        try:
            load_system_prompt(name, path)
        except (KeyError, OSError, TypeError, yaml.YAMLError):
            return False
        return True

    return registered + [name for name in config.prompt_settings if name not in registered and readable(name)]


class PairwiseJudging(BaseModel):
    """A pairwise rubric the judge panel runs on FULL/SHARDED pairs at the end of an incremental-delivery sweep;
    written in a config as the rubric's name, or as a mapping to give it its own token budget."""

    model_config = ConfigDict(extra="forbid")

    rubric: str
    """A registered pairwise rubric whose verdicts are the human-validation files' (vocabulary.PAIRWISE_DIMENSIONS)."""
    max_new_tokens: int | None = Field(default=None, gt=0)
    """Token budget of one judgment (None: the judge's own); an evidence-first answer needs several times more."""

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"rubric": value} if isinstance(value, str) else value

    def judge_spec(self, judge: JudgeSpec) -> JudgeSpec:
        """A panel judge as it judges under this rubric: with this rubric's token budget when it has one."""
        return judge if self.max_new_tokens is None else judge.model_copy(update={"max_new_tokens": self.max_new_tokens})


class IncrementalConfig(MultiTurnConfig):
    """Keys of an incremental-delivery sweep config beside the generic ones."""

    grid: ClassVar[Grid] = Grid(
        prompt_settings=Choices("prompt setting", (DEFAULT_SYSTEM_PROMPT,), system_prompt_names,
                                "the registered system prompts (`default`, the published study's; a plugin's), a name "
                                "in `extra.system_prompts_file`, or a .txt/.md file holding the prompt"),
        conditions=Choices("condition", PAIR_CONDITIONS, lambda config: CONDITIONS.names(),
                           f"the registered delivery conditions ({', '.join((FULL, SHARDED, RECAP, SNOWBALL))}; "
                           "a plugin's)"))

    constraints: str | None = None
    """Constraints JSONL (default: constraints.jsonl next to the tasks file)."""
    pairwise_judges: list[Annotated[PairwiseJudging, Shorthand("a rubric name", "rubric names")]] = Field(
        default_factory=list)
    """Pairwise rubrics every panel judge runs on each FULL/SHARDED pair, both orders, after the cells; rater id
    '<judge id>/<rubric>'."""
    pairwise_sample: int | None = Field(default=None, gt=0)
    """Judge only this many pairs (the study's validation set had 30), the same ones on every run (None: all)."""

    def cell_extra(self) -> dict[str, Any]:
        if not self.constraints:
            return super().cell_extra()
        return {**super().cell_extra(), "constraints": self.constraints,
                "constraints_sha256": file_sha256(self.constraints)}

    def input_files(self) -> list[str]:
        return [self.constraints] if self.constraints else []

    def required_files(self) -> dict[str, str | None]:
        return {"constraints file": self.constraints}


def pairwise_names(section: IncrementalConfig) -> list[tuple[Registry, str]]:
    """The pairwise rubrics a config names, to be checked against the rubric registry."""
    return [(RUBRICS, entry.rubric) for entry in section.pairwise_judges]


def pairwise_problems(config: Any) -> list[str]:
    """Pairwise judges need both FULL and SHARDED, a judge panel, and pairwise rubrics with the two verdicts of the
    human-validation files. `config` is the sweep's SweepConfig."""
    section: IncrementalConfig = config.section
    if not section.pairwise_judges:
        if section.pairwise_sample is not None:
            return ["pairwise_sample chooses the pairs of pairwise_judges, and pairwise_judges is empty"]
        return []
    problems = []
    missing = [c for c in PAIR_CONDITIONS if c not in config.conditions]
    if missing:
        problems.append(f"pairwise_judges compare FULL with SHARDED; conditions lack {', '.join(missing)}")
    if not config.judges:
        problems.append("pairwise_judges are run by the judge panel, and judges is empty")
    for entry in section.pairwise_judges:
        if entry.rubric not in RUBRICS:
            continue  # reported with the other unknown names
        rubric = load_rubric(entry.rubric)
        if rubric.kind != "pairwise" or rubric.keys != PAIRWISE_DIMENSIONS:
            problems.append(f"pairwise_judges: {entry.rubric!r} is a {rubric.kind} rubric with dimensions "
                            f"{list(rubric.keys)}; one needs kind pairwise and {list(PAIRWISE_DIMENSIONS)}")
    if len({entry.rubric for entry in section.pairwise_judges}) != len(section.pairwise_judges):
        problems.append("pairwise_judges names a rubric twice")
    return problems
