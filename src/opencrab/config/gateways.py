"""The registered gateways' config models: what each `[gateway.<name>]` table must be.

A gateway declares the model of its own table (`config_model`, a pydantic model whose
unknown keys are errors) on the class it registers through the `register_gateways` hook
(opencrab.plugins); the built-ins (rest, discord, cli, openai_compat) do the same
(opencrab.gateway.builtins). Nothing else lists gateways: the config's open `[gateway]`
table is checked against what is registered, plugins included.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from opencrab.errors import ConfigError
from opencrab.plugins import plugin_manager

Problem = tuple[tuple[str | int, ...], str]


def registered_gateways() -> dict[str, Any]:
    """Every gateway class the `register_gateways` hook registered, by its `name`.

    ConfigError names a registered class that declares no `name` or no `config_model`,
    and a name registered twice.
    """
    found: dict[str, Any] = {}

    def register(cls: Any) -> None:
        name = getattr(cls, "name", None)
        model = getattr(cls, "config_model", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"gateway class {cls!r} declares no `name`")
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"gateway {name!r} ({cls!r}) declares no pydantic `config_model`")
        if name in found and found[name] is not cls:
            raise ConfigError(f"gateway {name!r} is registered twice ({found[name]!r} and {cls!r})")
        found[name] = cls

    plugin_manager().hook.register_gateways(register=register)
    return found


def gateway_models() -> dict[str, type[BaseModel]]:
    """The config model of every registered gateway, by name."""
    return {name: cls.config_model for name, cls in registered_gateways().items()}


def unknown_gateway(name: str, models: dict[str, type[BaseModel]]) -> str:
    """The problem of a `[gateway.<name>]` table no registered gateway owns."""
    return (
        f"unknown gateway {name!r} (registered: {', '.join(sorted(models))}); "
        "is the plugin that provides it installed?"
    )


def gateway_problems(tables: Any) -> list[Problem]:
    """What the registered models find wrong with the `[gateway]` tables as written, each
    (key path, problem): an unknown gateway, a bad or unknown key of a known one."""
    if not isinstance(tables, dict):
        return [(("gateway",), "must be a table of gateways, [gateway.<name>]")]
    models = gateway_models()
    problems: list[Problem] = []
    for name, table in tables.items():
        path: tuple[str | int, ...] = ("gateway", name)
        model = models.get(name)
        if model is None:
            problems.append((path, unknown_gateway(name, models)))
            continue
        try:
            model.model_validate(table)
        except PydanticError as exc:
            for err in exc.errors():
                problems.append(((*path, *err["loc"]), _message(name, err)))
    return problems


def _message(name: str, err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown key for the {name} gateway"
    if err["type"] == "model_type":
        return f"[gateway.{name}] must be a table"
    got = err.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{err['msg']}{shown}"
