"""Prompt templates as data files, and the one renderer."""

from narrative_eval.prompts.render import PromptSettings, UnfilledSlotError, fill, load_prompt_file

__all__ = ["PromptSettings", "UnfilledSlotError", "fill", "load_prompt_file"]
