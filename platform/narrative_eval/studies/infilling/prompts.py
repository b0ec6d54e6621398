"""The infilling study's prompts: the prompt file of a setting (the config's own, or the registered one) and one
instance's messages under it."""

from __future__ import annotations

from pathlib import Path

from narrative_eval.prompts.render import FILL_TEMPLATE, PROMPT_SETTINGS, PromptSettings, fill, load_prompt_file
from narrative_eval.records import InfillingInstance, Message


def prompt_file_for(setting: str, prompt_file: str | Path | None = None) -> PromptSettings:
    """The infilling prompt file that defines `setting`: the config's own file, or the registered one."""
    if prompt_file:
        prompts = load_prompt_file(Path(prompt_file))
        if setting not in prompts.settings:
            raise ValueError(f"unknown prompt setting {setting!r}; {prompts.path} defines {', '.join(prompts.settings)}")
        return prompts
    entry = PROMPT_SETTINGS.entry(setting)
    if entry.meta.get("template") != FILL_TEMPLATE:
        raise ValueError(f"prompt setting {setting!r} is a {entry.meta.get('template')}, not a {FILL_TEMPLATE}")
    return entry.target


def render_infilling(setting: str, instance: InfillingInstance, prompt_file: str | Path | None = None) -> list[Message]:
    """Messages for one instance under one prompt setting (L0-L4, a reasoning paradigm or a plugin's)."""
    prompts = prompt_file_for(setting, prompt_file)
    user = fill(prompts.settings[setting]["user"], {"problem": instance.problem, "n": instance.n, "unit": instance.unit})
    messages = [Message(role="user", content=user)]
    if prompts.system:
        messages.insert(0, Message(role="system", content=prompts.system))
    return messages
