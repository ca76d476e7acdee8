"""Where each configuration value came from, and what that means for model choice.

The loader records, for every leaf it merged, the label of the layer that set it: the
packaged `default.toml`, the user's file (its path), an environment variable
(`environment OPENCRAB_…`) or the command line. `Settings.origin(path)` reads that back;
`source_kind` folds a label into packaged / file / environment / flag.

Model precedence for a purpose (`purpose_model`):
1. a per-purpose model the user set (`[llm.models] <purpose>` in their file, environment
   or flags);
2. else the user's default (`llm.default_provider` / `llm.default_model`, when the user
   set either);
3. else the packaged per-purpose model;
4. else the packaged default.
A value counts as the user's when a user layer set it or it differs from the packaged
one (settings changed in code count as the user's). `embedding` is the exception: a
default chat model cannot embed, so only a user's `[llm.models] embedding` replaces the
packaged one.
"""

from __future__ import annotations

import copy
import tomllib
from functools import cache
from importlib import resources
from typing import Any, Literal

from opencrab.config.models import PURPOSES, ModelRef, Settings

# re-exported: the labels and their look-up are provenance's vocabulary (config/origins.py)
from opencrab.config.origins import DEFAULT_SOURCE as DEFAULT_SOURCE
from opencrab.config.origins import KeyPath as KeyPath
from opencrab.config.origins import origin_of as origin_of
from opencrab.config.providers import registered_providers

SourceKind = Literal["packaged", "file", "environment", "flag"]


def source_kind(label: str) -> SourceKind:
    """packaged, file, environment or flag, from a layer label."""
    if label == DEFAULT_SOURCE:
        return "packaged"
    if label.startswith("environment "):
        return "environment"
    if label == "command line":
        return "flag"
    return "file"


def default_text() -> str:
    """The packaged `default.toml`."""
    return resources.files("opencrab.config").joinpath("default.toml").read_text("utf-8")


@cache
def _packaged() -> dict[str, Any]:
    return tomllib.loads(default_text())


def packaged_layer() -> dict[str, Any]:
    """The packaged defaults: `default.toml`, and for each registered provider with a
    key variable (`ProviderFacts.key_env`) that the file does not name, `[llm.providers.
    <name>] api_key = "${VARIABLE}"`, as the file has it for the built-ins."""
    layer = copy.deepcopy(_packaged())
    providers = layer.setdefault("llm", {}).setdefault("providers", {})
    for name, entry in registered_providers().items():
        if entry.facts.key_env and "api_key" not in providers.get(name, {}):
            providers.setdefault(name, {})["api_key"] = "${" + entry.facts.key_env + "}"
    return layer


def packaged_value(path: KeyPath) -> Any:
    """The value the packaged defaults (`packaged_layer`) give `path`, or None."""
    node: Any = packaged_layer() if path[:2] == ("llm", "providers") else _packaged()
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def _value(settings: Settings, path: KeyPath) -> Any:
    node: Any = settings
    for part in path:
        node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
    return _plain(node)


def user_set(settings: Settings, path: KeyPath) -> bool:
    """True when the user (file, environment, flags or code) gave `path` its value."""
    origins = settings.origins
    below = [label for known, label in origins.items() if known[: len(path)] == path]
    labels = [origin_of(origins, path), *below]
    if any(label != DEFAULT_SOURCE for label in labels):
        return True
    return bool(_value(settings, path) != packaged_value(path))


def user_default(settings: Settings) -> bool:
    """True when the user set `llm.default_provider` or `llm.default_model`."""
    return user_set(settings, ("llm", "default_provider")) or user_set(
        settings, ("llm", "default_model")
    )


def purpose_model(settings: Settings, purpose: str) -> ModelRef | None:
    """The model `[llm.models]` gives `purpose` after precedence; None: use the default."""
    ref: ModelRef | None = getattr(settings.llm.models, purpose, None)
    if ref is None:
        return None
    # remembered per settings object, keyed by everything the answer reads (a turn asks
    # about twenty times; settings changed in code give a new key)
    # the private dict read directly: the `origins` and `memo` properties go through
    # BaseModel.__getattr__, which cost more than the rest of this function
    private = settings.__pydantic_private__
    assert private is not None
    llm, origins, memo = settings.llm, private["_origins"], private["_memo"]
    key: tuple[Any, ...] = (purpose, ref.provider, ref.model, llm.default_provider)
    key += (llm.default_model, id(origins), len(origins))
    applies = memo.get(key)
    if applies is None:
        applies = (
            purpose == "embedding"
            or user_set(settings, ("llm", "models", purpose))
            or not user_default(settings)
        )
        if len(memo) > 64:
            memo.clear()
        memo[key] = applies
    return ref if applies else None


# ------------------------------------------------------------------ config show
SECRET_WORDS = ("key", "token", "secret", "password")
REDACTED = "<redacted>"
SECRET_TABLES = ("env", "headers")  # of an [mcp.servers.<name>]: where its credentials go


def effective_values(settings: Settings) -> list[tuple[str, Any, SourceKind, str]]:
    """Every value of the effective configuration: (dotted key, value, source, label).

    Secrets (SecretStr fields, keys naming a key, token, secret or password, every value
    of an MCP server's `env` and `headers`, and the password in a database URL) are shown
    as `<redacted>` when set; a model reference is one value `{provider, model}`.
    """
    from pydantic import BaseModel, SecretStr

    out: list[tuple[str, Any, SourceKind, str]] = []

    def label_of(path: KeyPath) -> str:
        below = [
            label
            for known, label in settings.origins.items()
            if known[: len(path)] == path and label != DEFAULT_SOURCE
        ]
        return below[0] if below else settings.origin(path)

    def leaf(path: KeyPath, value: Any) -> None:
        name = str(path[-1]).lower()
        if isinstance(value, SecretStr):
            value = REDACTED if value.get_secret_value() else None
        elif isinstance(value, ModelRef):
            value = value.model_dump()
        elif isinstance(value, str) and value and any(w in name for w in SECRET_WORDS):
            value = REDACTED
        elif path[:2] == ("mcp", "servers") and len(path) == 5 and path[3] in SECRET_TABLES:
            value = REDACTED if value else value
        elif path == ("database", "url") and value:
            value = _hide_password(str(value))
        elif not isinstance(value, str | int | float | bool | list | type(None)):
            value = str(value)
        label = label_of(path)
        out.append((".".join(str(p) for p in path), value, source_kind(label), label))

    def walk(node: Any, path: KeyPath) -> None:
        if isinstance(node, BaseModel) and not isinstance(node, ModelRef):
            for field in type(node).model_fields:
                walk(getattr(node, field), (*path, field))
            for key, value in (node.model_extra or {}).items():  # open tables: a provider's own
                # settings, [gateway.*]
                walk(value, (*path, key))
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        else:
            leaf(path, node)

    walk(settings, ())
    return out


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return REDACTED


def purpose_choices(settings: Settings) -> dict[str, tuple[str, str]]:
    """For each purpose, the configured model ("provider/model") and the key that chose it."""
    out: dict[str, tuple[str, str]] = {}
    for purpose in PURPOSES:
        ref = purpose_model(settings, purpose)
        if ref is not None:
            out[purpose] = (f"{ref.provider}/{ref.model}", f"llm.models.{purpose}")
        else:
            llm = settings.llm
            out[purpose] = (f"{llm.default_provider}/{llm.default_model}", "llm.default_model")
    return out
