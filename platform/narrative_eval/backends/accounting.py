"""What a hosted model's tokens cost.

Prices come from the model spec (`options.prices = {input_per_mtok, output_per_mtok}`, dollars
per million tokens), so a config states what a hosted model costs; the dry run prices a grid with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from narrative_eval.records import ModelSpec


@dataclass(frozen=True)
class Prices:
    """Dollars per million tokens."""

    input_per_mtok: float = 0.0
    """Price of a million prompt tokens."""
    output_per_mtok: float = 0.0
    """Price of a million generated tokens."""

    @classmethod
    def of(cls, spec: ModelSpec) -> Prices | None:
        """The spec's price table, or None when it has none (local models)."""
        table = spec.options.get("prices")
        if not table:
            return None
        unknown = set(table) - {"input_per_mtok", "output_per_mtok"}
        if unknown:
            raise ValueError(f"model {spec.id!r}: unknown price fields {sorted(unknown)}")
        return cls(float(table.get("input_per_mtok", 0.0)), float(table.get("output_per_mtok", 0.0)))

    def dollars(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6
