"""The gateways registered through the `register_gateways` plugin hook, built from their
checked `[gateway.<name>]` tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opencrab.config.gateways import registered_gateways
from opencrab.errors import ConfigError

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime
    from opencrab.gateway.base import Gateway


def build_gateway(
    name: str, runtime: Runtime, *, config: Any = None, **options: Any
) -> Gateway | None:
    """The gateway `name` as its table configures it (or `config`, a checked table: the
    file's merged with the dashboard's, opencrab.gateway.settings); None when it is off.
    ConfigError for a name no plugin registered."""
    registered = registered_gateways()
    if name not in registered:
        raise ConfigError(
            f"no gateway named {name!r} is registered "
            f"(registered: {', '.join(sorted(registered))})",
            key=f"gateway.{name}",
        )
    cls = registered[name]
    if config is None:
        config = runtime.settings.gateway.tables.get(name)
    if config is None:  # registered after the settings were loaded: its defaults
        config = cls.config_model()
    gateway: Gateway | None = cls.from_config(runtime, config, **options)
    return gateway


def build_gateways(runtime: Runtime) -> dict[str, Gateway]:
    """Every registered gateway its table turns on, built with the runtime alone, by name."""
    built: dict[str, Gateway] = {}
    for name in registered_gateways():
        gateway = build_gateway(name, runtime)
        if gateway is not None:
            built[name] = gateway
    return built
