"""Gateway factories collected from the `register_gateways` plugin hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opencrab.errors import ConfigError
from opencrab.plugins import plugin_manager

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime
    from opencrab.gateway.base import Gateway

GatewayFactory = Callable[..., "Gateway | None"]
"""`factory(runtime, **options)`: the gateway as configured, or None when it is off."""


def gateway_factories() -> dict[str, GatewayFactory]:
    """Every registered gateway factory by name (built-ins and plugins), in hook order."""
    factories: dict[str, GatewayFactory] = {}

    def register(name: str, factory: Callable[..., Any]) -> None:
        factories[name] = factory

    plugin_manager().hook.register_gateways(register=register)
    return factories


def build_gateway(name: str, runtime: Runtime, **options: Any) -> Gateway | None:
    """The gateway `name` as configured (None when it is off); ConfigError for an unknown one."""
    factories = gateway_factories()
    if name not in factories:
        raise ConfigError(
            f"no gateway named {name!r} is registered (registered: {', '.join(sorted(factories))})",
            key=f"gateway.{name}",
        )
    return factories[name](runtime, **options)
