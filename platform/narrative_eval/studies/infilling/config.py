"""The infilling study's own config keys, and its words for the grid: its prompt settings and its one condition."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from narrative_eval.data.files import file_sha256
from narrative_eval.prompts.render import FILL_TEMPLATE, PROMPT_SETTINGS, load_prompt_file
from narrative_eval.studies.infilling.vocabulary import CONDITION, DEFAULT_PROMPT_SETTING
from narrative_eval.study import Choices, Grid, StudyConfig


def prompt_setting_names(config: Any) -> list[str] | None:
    """The settings of the config's own prompt file, else every registered fill-the-blank setting (plugins' too).
    None while the prompt file is not there: the sweep reports the missing file."""
    prompt_file = config.section.prompt_file
    if prompt_file:
        return load_prompt_file(prompt_file).names() if Path(prompt_file).is_file() else None
    return [entry.name for entry in PROMPT_SETTINGS.entries() if entry.meta.get("template") == FILL_TEMPLATE]


class InfillingConfig(StudyConfig):
    """Keys of an infilling sweep config beside the generic ones."""

    grid: ClassVar[Grid] = Grid(
        prompt_settings=Choices("prompt setting", (DEFAULT_PROMPT_SETTING,), prompt_setting_names,
                                "the registered fill-the-blank settings (the TELeR levels L0-L4, the reasoning "
                                "paradigms, a plugin's; `--list` shows them), or those of `prompt_file`"),
        conditions=Choices("condition", (CONDITION,), lambda config: (CONDITION,), f"`{CONDITION}` only"))

    prompt_file: str | None = None
    """Alternative prompt settings file (defaults to the packaged one)."""

    def cell_extra(self) -> dict[str, Any]:
        if not self.prompt_file:
            return {}
        return {"prompt_file": self.prompt_file, "prompt_file_sha256": file_sha256(self.prompt_file)}

    def required_files(self) -> dict[str, str | None]:
        return {"prompt file": self.prompt_file}
