"""Delivering a creative-writing brief: the registered conditions, and the driver that runs conversations."""

from narrative_eval.delivery.conditions import (
    CONDITIONS,
    DEFAULT_SYSTEM_PROMPTS_FILE,
    DEFAULT_TURNS_FILE,
    TurnTemplates,
    condition,
    conversation_turns,
    load_turn_templates,
    replanning_conditions,
)
from narrative_eval.delivery.driver import deliver, generate_grouped, is_truncated, load_system_prompt, messages_of

__all__ = [
    "CONDITIONS",
    "DEFAULT_SYSTEM_PROMPTS_FILE",
    "DEFAULT_TURNS_FILE",
    "TurnTemplates",
    "condition",
    "conversation_turns",
    "deliver",
    "generate_grouped",
    "is_truncated",
    "load_system_prompt",
    "load_turn_templates",
    "messages_of",
    "replanning_conditions",
]
