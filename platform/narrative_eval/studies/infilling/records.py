"""Records of the narrative-infilling study: extraction results."""

from __future__ import annotations

from typing import Literal

from narrative_eval.records import Frozen


class ExtractionResult(Frozen):
    """The answer pulled out of a raw reply, and how it was found."""

    answer: str | None
    """The extracted fill, or None when nothing usable was found."""
    status: Literal["tag", "echo", "fallback", "none"]
    """tag: <ANSWER> tags; echo: recovered from a passage echo; fallback: whole reply used; none: nothing extractable."""
    think_removed: bool = False
    """True when reasoning up to </think> was stripped first."""

    @property
    def success(self) -> bool:
        return self.status in ("tag", "echo")
