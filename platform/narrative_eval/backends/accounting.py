"""What a hosted model's tokens cost.

Prices come from the model spec (`options.prices = {input_per_mtok, output_per_mtok, batch_share}`,
dollars per million tokens, and the share of that price a batch request costs, 0.5 at OpenAI and
Anthropic), so a config states what a hosted model costs; the dry run prices a grid with them, and
every cell logs what its replies cost synchronously, in batches, and what this run paid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from narrative_eval.records import ModelSpec


@dataclass(frozen=True)
class Prices:
    """Dollars per million tokens."""

    input_per_mtok: float = 0.0
    """Price of a million prompt tokens."""
    output_per_mtok: float = 0.0
    """Price of a million generated tokens."""
    batch_share: float = 0.5
    """Share of the list price a request sent through the provider's batch API costs."""

    @classmethod
    def of(cls, spec: ModelSpec) -> Prices | None:
        """The spec's price table, or None when it has none (local models)."""
        table = spec.options.get("prices")
        if not table:
            return None
        unknown = set(table) - {"input_per_mtok", "output_per_mtok", "batch_share"}
        if unknown:
            raise ValueError(f"model {spec.id!r}: unknown price fields {sorted(unknown)}")
        return cls(float(table.get("input_per_mtok", 0.0)), float(table.get("output_per_mtok", 0.0)),
                   float(table.get("batch_share", cls.batch_share)))

    def dollars(self, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float:
        list_price = (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6
        return list_price * self.batch_share if batch else list_price


SOURCES = ("cache", "sync", "batch")
"""Where a reply came from: the request cache, a synchronous request, a provider batch."""


@dataclass
class Usage:
    """Token counts of one model's replies in this process, by source."""

    prices: Prices | None = None
    """The model's price table (None: a local model, free)."""
    prompt: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    """Prompt tokens per source."""
    completion: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    """Generated tokens per source."""
    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    """Replies per source."""

    def add(self, source: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.prompt[source] += prompt_tokens
        self.completion[source] += completion_tokens
        self.requests[source] += 1

    def figures(self) -> dict[str, float]:
        """Tokens and dollars: every reply at list and at batch prices, and what was paid (cache hits are free)."""
        tokens_in, tokens_out = sum(self.prompt.values()), sum(self.completion.values())
        prices = self.prices or Prices()
        paid = prices.dollars(self.prompt["sync"], self.completion["sync"]) + prices.dollars(
            self.prompt["batch"], self.completion["batch"], batch=True)
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "requests_batch": self.requests["batch"],
            "requests_sync": self.requests["sync"],
            "usd_sync": prices.dollars(tokens_in, tokens_out),
            "usd_batch": prices.dollars(tokens_in, tokens_out, batch=True),
            "usd_paid": paid,
        }


def usd(amount: float) -> str:
    """Dollars for people: cents, or four decimals for amounts under a cent (a test grid's judge)."""
    return f"${amount:,.2f}" if amount == 0 or abs(amount) >= 0.01 else f"${amount:.4f}"


def add_figures(*figures: dict[str, float]) -> dict[str, float]:
    """Key-wise sum of Usage.figures() dicts."""
    total: dict[str, float] = {}
    for one in figures:
        for key, value in one.items():
            total[key] = total.get(key, 0.0) + value
    return total
