"""Where an infilling blank sits in its passage: opening, middle or closing."""

from __future__ import annotations

import math

from narrative_eval.data.instances import sentences
from narrative_eval.records import InfillingInstance, Position

POSITIONS: tuple[Position, ...] = ("opening", "middle", "closing")
"""Blank positions in passage order."""


def position_of(unit_idx: int, n_sentences: int) -> Position:
    """Blank position from the first removed sentence's 0-based index and the passage length.

    The product rule, applied literally: opening if unit_idx <= ceil(N/3), middle if
    unit_idx <= ceil(2N/3), else closing. (For a five-sentence passage no index reaches closing.)
    """
    if n_sentences <= 0:
        raise ValueError("a passage needs at least one sentence")
    if unit_idx <= math.ceil(n_sentences / 3):
        return "opening"
    if unit_idx <= math.ceil(2 * n_sentences / 3):
        return "middle"
    return "closing"


def blank_position(instance: InfillingInstance) -> Position:
    """Opening, middle or closing, from the instance's unit_idx and its passage's sentence count."""
    return position_of(instance.unit_idx, len(sentences(instance.source_text)))
