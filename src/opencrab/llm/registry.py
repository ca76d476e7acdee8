"""Provider factories collected from the `register_providers` plugin hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opencrab.config.models import ProviderConfig
from opencrab.errors import ProviderNotConfigured
from opencrab.llm.base import LlmProvider
from opencrab.plugins import plugin_manager


def provider_factories() -> dict[str, Callable[..., LlmProvider]]:
    """Every registered provider factory by name (built-ins and plugins)."""
    factories: dict[str, Callable[..., LlmProvider]] = {}

    def register(name: str, factory: Callable[..., Any]) -> None:
        factories[name] = factory

    plugin_manager().hook.register_providers(register=register)
    return factories


def build_provider(name: str, config: ProviderConfig | None = None) -> LlmProvider:
    """Construct the provider `name` from its config section."""
    factories = provider_factories()
    if name not in factories:
        raise ProviderNotConfigured(
            f"unknown provider (registered: {', '.join(sorted(factories))})", provider=name
        )
    return factories[name](config or ProviderConfig(), name=name)
