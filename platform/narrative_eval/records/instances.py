"""The records of an instances file: a passage with one blank and the sentences removed from it (the infilling study's
items; the continuation example and plugins read the same files as passages)."""

from __future__ import annotations

from typing import Literal

from narrative_eval.records.base import Frozen

Position = Literal["opening", "middle", "closing"]


class InfillingInstance(Frozen):
    """One infilling problem in the published benchmark's columns."""

    dataset: str
    """Source collection (wikipedia, cnn_dailymail, rocstories, sind, or a shipped domain name)."""
    ref_id: str
    """Passage identifier within the dataset."""
    source_text: str
    """The full passage (sentences may be joined by ' <eos> ')."""
    problem: str
    """The passage with exactly one blank '______' where the sentences were removed."""
    gold_answer: str
    """The removed sentences."""
    unit: str = "sentence(s)"
    """Unit of the removed span."""
    n: int
    """Number of removed sentences (1-3)."""
    unit_idx: int
    """0-based index of the first removed sentence."""

    @property
    def instance_id(self) -> str:
        return f"{self.dataset}/{self.ref_id}/{self.unit_idx}/{self.n}"
