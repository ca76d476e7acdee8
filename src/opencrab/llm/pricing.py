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
   costs ("gpt-5.2-codex" → "gpt-5.2"), as OpenAI prices them;
5. a provider the table has no row for at all — a coding CLI's own name for the endpoint
   it was given, such as the "opencrab" section agent mode writes into Codex's
   config.toml, or a user's proxy — costs what the providers pricing that model charge
   (by rules 1 and 4) when they agree; a model priced differently by two stays unknown.
A cost the provider reports itself (OpenRouter does) wins over the table.

Default prices are each registered provider's `ProviderFacts.prices` (`default_prices`);
the stored table (seeded by the migrations with the built-ins' defaults, edited through
`save_price`) wins, and a model it has no row for costs its provider's default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Literal

from sqlalchemy.engine import Connection

from opencrab.errors import ValidationError
from opencrab.llm.registry import provider_facts
from opencrab.llm.types import Usage
from opencrab.store.repositories import imports as imports_repo
from opencrab.store.repositories import metrics as metrics_repo

CostSource = Literal["provider", "pricing", "unknown"]

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
    cache_read_price_per_1m: float | None = None  # None: priced as input
    cache_write_price_per_1m: float | None = None  # None: priced as input

    def cost(self, usage: Usage) -> float:
        """USD for a call's tokens.

        `usage.input_tokens` includes the cached ones (opencrab's Usage convention):
        those read from a cache cost the cache read rate, those written to one the cache
        write rate, the rest the input rate. Counts a provider reports beyond the input
        total are capped to it, so no token is billed twice.
        """
        price_in = self.input_price_per_1m
        read = min(max(usage.cache_read_tokens, 0), usage.input_tokens)
        write = min(max(usage.cache_write_tokens, 0), usage.input_tokens - read)
        read_rate = (
            price_in if self.cache_read_price_per_1m is None else self.cache_read_price_per_1m
        )
        write_rate = (
            price_in if self.cache_write_price_per_1m is None else self.cache_write_price_per_1m
        )
        return (
            (usage.input_tokens - read - write) * price_in
            + read * read_rate
            + write * write_rate
            + usage.output_tokens * self.output_price_per_1m
        ) / 1_000_000


def _rates(price: ModelPrice) -> tuple[float | None, ...]:
    return (
        price.input_price_per_1m,
        price.output_price_per_1m,
        price.cache_read_price_per_1m,
        price.cache_write_price_per_1m,
    )


def default_prices() -> list[ModelPrice]:
    """Every registered provider's default prices (its `ProviderFacts.prices`)."""
    return [
        ModelPrice(
            name,
            price.model,
            price.input_per_1m,
            price.output_per_1m,
            price.context_window,
            price.cache_read_per_1m,
            price.cache_write_per_1m,
        )
        for name, facts in provider_facts().items()
        for price in facts.prices
    ]


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
        self._providers = {p for p, _ in self._exact} | set(self._patterns)
        self._by_model: dict[str, list[ModelPrice]] = {}
        for price in self._exact.values():
            self._by_model.setdefault(price.model, []).append(price)

    @classmethod
    def load(cls, conn: Connection) -> PriceBook:
        """The price table as stored, over the registered providers' default prices."""
        stored = [ModelPrice(*row) for row in metrics_repo.prices(conn)]
        have = {(p.provider, p.model) for p in stored}
        defaults = [p for p in default_prices() if (p.provider, p.model) not in have]
        return cls([*defaults, *stored])

    def prices(self) -> list[ModelPrice]:
        """Every row of the book."""
        return [*self._exact.values(), *(p for ps in self._patterns.values() for p in ps)]

    @classmethod
    def defaults(cls) -> PriceBook:
        """The registered providers' default prices alone (no database)."""
        return cls(default_prices())

    def find(self, provider: str, model: str) -> ModelPrice | None:
        """The price row for a model, by the lookup order in the module docstring."""
        if provider not in self._providers:
            return self._priced_elsewhere(model)
        return self._find(provider, model)

    def _priced_elsewhere(self, model: str) -> ModelPrice | None:
        for name in dict.fromkeys((model, base_model(model))):
            rows = self._by_model.get(name, [])
            if len({_rates(r) for r in rows}) == 1:
                return rows[0]
        return None

    def _find(self, provider: str, model: str) -> ModelPrice | None:
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
            return self._find(provider, base)
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


MAX_PRICE_PER_1M = 1_000_000.0  # anything above is a typo, not a price


def save_price(conn: Connection, price: ModelPrice) -> None:
    """Insert or replace one model_pricing row, after checking it.

    Raises:
        ValidationError: an empty or too long provider/model, or a rate that is negative,
            not finite or absurd.
    """
    if not price.provider or len(price.provider) > 64:
        raise ValidationError("provider must be 1 to 64 characters")
    if not price.model or len(price.model) > 200:
        raise ValidationError("model must be 1 to 200 characters")
    rates = {
        "input": price.input_price_per_1m,
        "output": price.output_price_per_1m,
        "cache read": price.cache_read_price_per_1m,
        "cache write": price.cache_write_price_per_1m,
    }
    for name, rate in rates.items():
        if rate is not None and not (0.0 <= rate <= MAX_PRICE_PER_1M):  # also refuses NaN
            raise ValidationError(
                f"{name} price must be between 0 and {MAX_PRICE_PER_1M:,.0f} $ per 1M tokens, "
                f"not {rate}"
            )
    if price.context_window is not None and not 0 < price.context_window < 2**31:
        raise ValidationError(
            f"context window must be a positive token count, not {price.context_window}"
        )
    metrics_repo.save_price(
        conn,
        metrics_repo.PriceRow(
            price.provider,
            price.model,
            price.input_price_per_1m,
            price.output_price_per_1m,
            price.context_window,
            price.cache_read_price_per_1m,
            price.cache_write_price_per_1m,
        ),
        updated_at=datetime.now(UTC),
    )


def reprice(conn: Connection, price: ModelPrice) -> int:
    """Cost again, at `price`, the recorded calls it now prices: those whose cost came
    from the table or had none (a cost the provider reported stays), and whose model
    the table's lookup resolves to this row. Imported sessions' totals follow. Returns
    how many calls were updated."""
    book = PriceBook.load(conn)
    models = [
        model
        for model in metrics_repo.costed_models(conn, price.provider)
        if (found := book.find(price.provider, model)) is not None
        and (found.provider, found.model) == (price.provider, price.model)
    ]
    if not models:
        return 0
    costs = [
        (
            r.id,
            price.cost(
                Usage(
                    input_tokens=r.input_tokens,
                    output_tokens=r.output_tokens,
                    total_tokens=r.total_tokens,
                    cache_read_tokens=r.cache_read_tokens,
                    cache_write_tokens=r.cache_write_tokens,
                )
            ),
        )
        for r in metrics_repo.costable_calls(conn, price.provider, models)
    ]
    metrics_repo.set_costs(conn, costs)
    imports_repo.refresh_costs(conn, price.provider, models)
    return len(costs)
