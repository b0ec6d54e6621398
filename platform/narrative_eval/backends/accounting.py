"""Token, time and dollar accounting for a set of replies.

Prices come from the model spec (`options.prices = {input_per_mtok, output_per_mtok}`, dollars
per million tokens), so a config states what a hosted model costs. Cache hits are counted
apart: they cost nothing this time, and `dollars` only charges what was really sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from narrative_eval.records import ModelSpec, Reply


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


@dataclass(frozen=True)
class Usage:
    """Sums over a set of replies."""

    requests: int
    """Replies counted."""
    errors: int
    """Replies that carry an error."""
    cached: int
    """Replies served from the request cache."""
    prompt_tokens: int
    """Prompt tokens over all replies (cached ones included: they describe the run)."""
    completion_tokens: int
    """Generated tokens over all replies."""
    seconds: float
    """Generation seconds over all replies (cache hits keep their original time)."""
    dollars: float | None
    """Cost of the replies generated now (cache hits excluded); None without a price table."""

    def as_metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat name -> number map for metric logging (dollars left out when unknown)."""
        return {f"{prefix}{name}": float(value) for name, value in asdict(self).items() if value is not None}


def account(replies: Iterable[Reply], spec: ModelSpec | None = None) -> Usage:
    """Token, time and dollar totals of `replies`, priced with `spec`'s price table if it has one."""
    replies = list(replies)
    prices = Prices.of(spec) if spec is not None else None
    fresh = [r for r in replies if not r.cached]
    return Usage(
        requests=len(replies),
        errors=sum(1 for r in replies if r.error is not None),
        cached=len(replies) - len(fresh),
        prompt_tokens=sum(r.prompt_tokens for r in replies),
        completion_tokens=sum(r.completion_tokens for r in replies),
        seconds=sum(r.seconds for r in replies),
        dollars=(
            prices.dollars(sum(r.prompt_tokens for r in fresh), sum(r.completion_tokens for r in fresh))
            if prices is not None
            else None
        ),
    )
