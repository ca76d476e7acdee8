"""Model prices (seed 001 `model_pricing`) and the cost of a call.

Lookup order for (provider, model):
1. the exact row, e.g. ("openai", "gpt-5-mini");
2. for routed ids such as OpenRouter's "deepseek/deepseek-v3.2", the row of the vendor
   and model inside it, ("deepseek", "deepseek-v3.2");
3. the provider's wildcard rows, most specific first: ("ollama", "*"), and
   ("openrouter", "free/*"), which also covers OpenRouter's ":free" model variants;
4. the same model under the id the table uses: a dated snapshot costs what its model
   costs ("claude-sonnet-4-5-20250929" → "claude-sonnet-4.5", "gpt-5.2-2025-12-11" →
   "gpt-5.2"), and a `-codex` variant without a row of its own what its base model
   costs ("gpt-5.2-codex" → "gpt-5.2"), as OpenAI prices them.
A cost the provider reports itself (OpenRouter does) wins over the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.llm.types import Usage
from opencrab.store.tables import model_pricing

CostSource = Literal["provider", "pricing", "unknown"]

# (provider, model, input $/1M, output $/1M, context window): seed 001, February 2026
DEFAULT_PRICES: tuple[tuple[str, str, float, float, int | None], ...] = (
    ("openai", "gpt-5.2", 1.75, 14.00, 256_000),
    ("openai", "gpt-5.2-pro", 21.00, 168.00, 256_000),
    ("openai", "gpt-5-mini", 0.25, 2.00, 128_000),
    ("anthropic", "claude-opus-4.6", 5.00, 25.00, 1_000_000),
    ("anthropic", "claude-sonnet-4.5", 3.00, 15.00, 1_000_000),
    ("anthropic", "claude-haiku-4.5", 1.00, 5.00, 200_000),
    ("google", "gemini-3-pro", 2.00, 12.00, 1_000_000),
    ("google", "gemini-3-flash", 0.50, 3.00, 1_000_000),
    ("google", "gemini-2.5-flash-lite", 0.10, 0.40, 128_000),
    ("deepseek", "deepseek-v3.2", 0.25, 0.38, 128_000),
    ("ollama", "*", 0.0, 0.0, None),
    ("openrouter", "free/*", 0.0, 0.0, None),
    # local providers run on your own machine
    ("llamacpp", "*", 0.0, 0.0, None),
    ("embedded", "*", 0.0, 0.0, None),
)
PRICES_UPDATED_AT = datetime(2026, 2, 1, tzinfo=UTC)


_DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_DASH_VERSION = re.compile(r"^(claude-[a-z]+-\d+)-(\d)$")


def base_model(model: str) -> str:
    """The id a price table lists a model under: without a snapshot date, with a
    dotted Claude version, without a `-codex` suffix (see the module docstring)."""
    base = _DATED.sub("", model)
    base = _DASH_VERSION.sub(r"\1.\2", base)
    if base == model and model.endswith("-codex"):
        base = model.removesuffix("-codex")
    return base


@dataclass(frozen=True)
class ModelPrice:
    provider: str
    model: str
    input_price_per_1m: float
    output_price_per_1m: float
    context_window: int | None = None

    def cost(self, usage: Usage) -> float:
        """USD for a call's tokens (cached tokens are priced as input)."""
        return (
            usage.input_tokens * self.input_price_per_1m
            + usage.output_tokens * self.output_price_per_1m
        ) / 1_000_000


class PriceBook:
    """The model_pricing table in memory, with the lookup rules above.

    Example:
        book = PriceBook.load(conn)
        cost, source = book.cost("openai", "gpt-5-mini", usage)
    """

    def __init__(self, prices: list[ModelPrice]) -> None:
        self._exact: dict[tuple[str, str], ModelPrice] = {}
        self._patterns: dict[str, list[ModelPrice]] = {}
        for price in prices:
            if "*" in price.model or "?" in price.model:
                self._patterns.setdefault(price.provider, []).append(price)
            else:
                self._exact[(price.provider, price.model)] = price
        for patterns in self._patterns.values():
            patterns.sort(key=lambda p: len(p.model.replace("*", "")), reverse=True)

    @classmethod
    def load(cls, conn: Connection) -> PriceBook:
        rows = conn.execute(sa.select(model_pricing)).all()
        return cls(
            [
                ModelPrice(
                    r.provider,
                    r.model,
                    r.input_price_per_1m,
                    r.output_price_per_1m,
                    r.context_window,
                )
                for r in rows
            ]
        )

    @classmethod
    def defaults(cls) -> PriceBook:
        return cls([ModelPrice(*row) for row in DEFAULT_PRICES])

    def find(self, provider: str, model: str) -> ModelPrice | None:
        """The price row for a model, by the lookup order in the module docstring."""
        found = self._exact.get((provider, model))
        if found is not None:
            return found
        if "/" in model:
            vendor, inner = model.split("/", 1)
            found = self._exact.get((vendor, inner.removesuffix(":free")))
            if found is not None and not model.endswith(":free"):
                return found
        candidates = [model]
        if model.endswith(":free"):
            candidates.append("free/" + model.removesuffix(":free"))
        for pattern in self._patterns.get(provider, []):
            if any(fnmatchcase(c, pattern.model) for c in candidates):
                return pattern
        base = base_model(model)
        if base != model:
            return self.find(provider, base)
        return None

    def cost(
        self, provider: str, model: str, usage: Usage, reported: float | None = None
    ) -> tuple[float, CostSource]:
        """(USD, where the figure came from) for one call."""
        if reported is not None:
            return reported, "provider"
        price = self.find(provider, model)
        if price is None:
            return 0.0, "unknown"
        return price.cost(usage), "pricing"
