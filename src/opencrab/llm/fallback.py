"""Which model a fallback uses: never a pricier tier than the one that failed.

`[llm.fallback] chain` entries are:
- an alias (`claude_fast`) or `provider/model` (`anthropic/claude-haiku-4.5`): exactly
  that model, whatever it costs — the config says so;
- a bare provider (`anthropic`): that provider's model of the failed model's tier.

Tiers come from the alias table: an alias named `fast`, `smart` or `best`, or ending in
`_fast`, `_smart` or `_best`, puts its model in that tier for its provider (seed 001:
fast → openai/gpt-5-mini, claude_fast → anthropic/claude-haiku-4.5, claude_best →
anthropic/claude-opus-4.6, …). When the failed model has a tier, a bare provider falls
back to its model of that tier, else of the nearest lower one; with no tier at or below,
to its configured model only when that has no higher tier. When the failed model has no
tier, the provider's highest-tier model that costs no more (input + output rate in the
price table) is used, its cheapest tier when none does or prices are unknown, and its
configured model when it has no tiers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from opencrab.llm.pricing import PriceBook

TIERS = ("fast", "smart", "best")
"""Cheapest first."""


@dataclass(frozen=True)
class Target:
    """A provider and one of its models."""

    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


def alias_tier(alias: str) -> str | None:
    """The tier an alias name puts its model in, if any."""
    for tier in TIERS:
        if alias == tier or alias.endswith(f"_{tier}"):
            return tier
    return None


class FallbackPlanner:
    """Turns chain entries into targets for a failed model, by tier and price."""

    def __init__(
        self,
        aliases: Mapping[str, Target],
        prices: Callable[[], PriceBook | None],
        configured_model: Callable[[str], str | None],
    ) -> None:
        self.aliases = aliases
        self._prices = prices
        self._configured_model = configured_model

    def target(self, entry: str, failed: Target, providers: Mapping[str, object]) -> Target | None:
        """The model `entry` stands for after `failed` failed; None when it has none."""
        if entry in self.aliases:
            return self.aliases[entry]
        provider, slash, model = entry.partition("/")
        if slash and provider in providers and model:
            return Target(provider, model)
        return self.same_tier(entry, failed)

    def tier_of(self, target: Target) -> str | None:
        """The tier of a model, from the first tier alias naming it."""
        for alias, aliased in self.aliases.items():
            tier = alias_tier(alias)
            if tier is not None and aliased == target:
                return tier
        return None

    def tiers_of(self, provider: str) -> dict[str, str]:
        """tier → model on `provider` (the first alias of each tier)."""
        found: dict[str, str] = {}
        for alias, aliased in self.aliases.items():
            tier = alias_tier(alias)
            if tier is not None and aliased.provider == provider:
                found.setdefault(tier, aliased.model)
        return found

    def same_tier(self, provider: str, failed: Target) -> Target | None:
        """`provider`'s model for a fallback from `failed` (module docstring rules)."""
        tiers = self.tiers_of(provider)
        tier = self.tier_of(failed)
        configured = self._configured_model(provider)
        if tier is not None:
            for lower in reversed(TIERS[: TIERS.index(tier) + 1]):
                if lower in tiers:
                    return Target(provider, tiers[lower])
            if configured is None:
                return None
            own = self.tier_of(Target(provider, configured))
            if own is not None and TIERS.index(own) > TIERS.index(tier):
                return None
            return Target(provider, configured)
        if not tiers:
            return None if configured is None else Target(provider, configured)
        ordered = [tiers[t] for t in reversed(TIERS) if t in tiers]  # priciest first
        limit = self._rate(failed)
        if limit is not None:
            for model in ordered:
                rate = self._rate(Target(provider, model))
                if rate is not None and rate <= limit:
                    return Target(provider, model)
        return Target(provider, ordered[-1])

    def _rate(self, target: Target) -> float | None:
        book = self._prices()
        price = book.find(target.provider, target.model) if book is not None else None
        if price is None:
            return None
        return price.input_price_per_1m + price.output_price_per_1m
