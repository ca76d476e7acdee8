"""The registered providers (the `register_providers` plugin hook): their classes, their
facts, and building one from its config section.

Everything that needs to know which providers exist, which take a key or a base URL,
which run locally and what their models cost by default asks here (or, below the llm
layer, opencrab.config.providers.registered_providers); nothing keeps a list of its own.
"""

from __future__ import annotations

import importlib.util

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import ProviderFacts, registered_providers
from opencrab.errors import ProviderNotConfigured
from opencrab.llm.base import LlmProvider


def provider_classes() -> dict[str, type[LlmProvider]]:
    """Every registered provider class by name (built-ins and plugins)."""
    return {name: entry.cls for name, entry in registered_providers().items()}


def provider_facts() -> dict[str, ProviderFacts]:
    """Every registered provider's facts by name."""
    return {name: entry.facts for name, entry in registered_providers().items()}


def provider_names() -> tuple[str, ...]:
    """The registered providers' names, in registration order."""
    return tuple(registered_providers())


def build_provider(name: str, config: ProviderConfig | None = None) -> LlmProvider:
    """Construct the provider `name` from its config section; ProviderNotConfigured when
    no provider of that name is registered, its library is not installed (naming the
    extra that installs it) or its own settings are invalid."""
    registered = registered_providers()
    if name not in registered:
        raise ProviderNotConfigured(
            f"unknown provider (registered: {', '.join(registered)})", provider=name
        )
    facts = registered[name].facts
    for library in facts.libraries:
        if importlib.util.find_spec(library) is None:
            hint = f" (pip install 'opencrab[{facts.extra}]')" if facts.extra else ""
            raise ProviderNotConfigured(
                f"its library is not installed: {library}{hint}", provider=name
            )
    cls: type[LlmProvider] = registered[name].cls
    return cls(config or ProviderConfig(), name=name)
