"""What a provider declares about itself (`ProviderFacts`), and the registered providers.

Every provider class (opencrab.llm.base.LlmProvider) carries its facts in `facts`: the
environment variable its key is read from, whether a base URL applies, whether it runs
on this machine, its default prices and the model of its own settings. Nothing else
lists providers: the config's `[llm.providers.<name>]` tables, the router, the price
book and the dashboard's LLM settings read what the `register_providers` hook registered
(the built-ins through the same hook as plugins, opencrab.plugins).

Example:
    class EchoOptions(ProviderOptions):
        greeting: str = "hello"

    class EchoProvider(LlmProvider):
        name = "echo"
        facts = ProviderFacts(
            key_env="ECHO_API_KEY",
            prices=(Price("echo-1", input_per_1m=0.5, output_per_1m=1.0),),
            options=EchoOptions,
        )
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from opencrab.errors import ConfigError
from opencrab.plugins import plugin_manager


class ProviderOptions(BaseModel):
    """Base of a provider's own settings (the keys of `[llm.providers.<name>]` beyond
    enabled, api_key, base_url, default_model and timeout_secs); unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoOptions(ProviderOptions):
    """A provider without settings of its own."""


@dataclass(frozen=True)
class Price:
    """A model's default price in USD per million tokens (seed 001 `model_pricing`);
    `model` may be a pattern (`*`); a cache rate of None: priced as other input."""

    model: str
    input_per_1m: float
    output_per_1m: float
    context_window: int | None = None
    cache_read_per_1m: float | None = None
    cache_write_per_1m: float | None = None


@dataclass(frozen=True)
class ProviderFacts:
    """What the rest of opencrab knows about a provider, declared on its class."""

    key_env: str | None = None
    """The environment variable its API key is read from; None: it takes no key."""
    base_url: bool = True
    """Whether a base URL applies (its vendor's API moved, or a server's address)."""
    local: bool = False
    """Whether the model runs on this machine (asked whether it answers before use)."""
    prices: tuple[Price, ...] = ()
    """Default prices of its models (a stored model_pricing row wins)."""
    options: type[ProviderOptions] = NoOptions
    """The model of its own settings, validated when the config is loaded."""
    libraries: tuple[str, ...] = ()
    """Modules it imports when built; a missing one makes it unavailable, saying so."""
    extra: str | None = None
    """The opencrab extra that installs those libraries (`pip install 'opencrab[extra]'`)."""


@dataclass(frozen=True)
class Registered:
    """One registered provider: its class (an LlmProvider subclass) and its facts."""

    name: str
    cls: Any
    facts: ProviderFacts


def registered_providers() -> dict[str, Registered]:
    """Every provider the `register_providers` hook registered, by name, in the order the
    plugins were registered: opencrab's own first, then installed plugins.

    ConfigError names a registered class that does not declare its `name` or `facts`,
    and a name registered twice.
    """
    found: dict[str, Registered] = {}

    def register(cls: Any, *more: Any) -> None:
        if more or isinstance(cls, str):
            raise ConfigError(
                f"register_providers: register{(cls, *more)!r}: give the provider class "
                "alone, register(ProviderClass); its name and facts are declared on it"
            )
        name = getattr(cls, "name", None)
        facts = getattr(cls, "facts", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"provider class {cls!r} declares no `name`")
        if not isinstance(facts, ProviderFacts):
            raise ConfigError(f"provider {name!r} ({cls!r}) declares no ProviderFacts `facts`")
        if name in found and found[name].cls is not cls:
            raise ConfigError(
                f"provider {name!r} is registered twice ({found[name].cls!r} and {cls!r})"
            )
        found[name] = Registered(name, cls, facts)

    # each implementation in registration order (pluggy calls the last registered first)
    for impl in plugin_manager().hook.register_providers.get_hookimpls():
        impl.function(register=register)
    return found
