"""Chat-platform gateways' settings made on the dashboard, merged with the config file.

A chat-platform gateway (its config model a `PlatformConfig`, or one with secrets, as
Discord's) can be set up on the dashboard's Gateways page or with `PUT
/api/gateways/{name}` as well as in its `[gateway.<name>]` table. What the dashboard saves
is kept in `gateway_settings` (the secrets — the model's `SecretStr` fields — encrypted
with the key of the LLM API keys, shown only by their last four characters) and merged
under the file's table when the gateway is built (`effective_config`): **a key the config
file sets wins** and is read-only on the page; the dashboard fills in the rest. A
`${VARIABLE}` whose variable is unset counts as not set, so the dashboard may supply it.

Example:
    save_settings(runtime, "slack", {"mode": "socket", "bot_token": "xoxb-…"}, actor="local")
    effective_config(runtime, "slack")  # -> SlackConfig, the file's keys over these
"""

from __future__ import annotations

import json
import types
import typing
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic import ValidationError as PydanticError

from opencrab.config.gateways import registered_gateways
from opencrab.config.origins import DEFAULT_SOURCE, origin_of
from opencrab.config.provenance import packaged_value
from opencrab.config.secret_key import SecretBox, box_for_writing
from opencrab.errors import ConfigError, NotFoundError, ValidationError
from opencrab.gateway.platform import PlatformConfig
from opencrab.store.repositories import gateway_settings as repo
from opencrab.store.repositories import llm_settings as llm_repo
from opencrab.store.repositories import mcp_servers as mcp_repo

if TYPE_CHECKING:
    from opencrab.core.runtime import Runtime
    from opencrab.store.repositories.gateway_settings import GatewaySettingsRow

Kind = Literal["bool", "number", "text", "secret", "choice", "list", "map"]


def platform_gateways() -> dict[str, type[BaseModel]]:
    """The registered gateways the Gateways page configures, with their config models:
    every chat platform's (`PlatformConfig`) and any other with secrets (Discord)."""
    found: dict[str, type[BaseModel]] = {}
    for name, cls in registered_gateways().items():
        model = cls.config_model
        if issubclass(model, PlatformConfig) or secret_keys(model):
            found[name] = model
    return dict(sorted(found.items()))


def model_of(name: str) -> type[BaseModel]:
    """The config model of the platform gateway `name`; NotFoundError for another name."""
    found = platform_gateways().get(name)
    if found is None:
        raise NotFoundError(f"no chat-platform gateway is named {name!r}")
    return found


# ------------------------------------------------------------ the model's fields
def _kind(annotation: Any) -> tuple[Kind, list[str]]:
    """What the form shows for a field of this type, and the choices of a Literal."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if origin is typing.Annotated:
        return _kind(args[0])
    if annotation is SecretStr:
        return "secret", []
    if annotation is bool:
        return "bool", []
    if annotation in (int, float):
        return "number", []
    if origin is Literal:
        return "choice", [str(a) for a in get_args(annotation)]
    if origin is list or annotation is list:
        return "list", []
    if origin is dict or annotation is dict:
        return "map", []
    return "text", []


def secret_keys(model: type[BaseModel]) -> list[str]:
    """The model's secret fields (SecretStr)."""
    return [k for k, f in model.model_fields.items() if _kind(f.annotation)[0] == "secret"]


def fields_of(model: type[BaseModel]) -> list[dict[str, Any]]:
    """Each field of the model as the form shows it: name, kind, choices, default."""
    out = []
    for key, field in model.model_fields.items():
        kind, choices = _kind(field.annotation)
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        out.append(
            {
                "name": key,
                "kind": kind,
                "choices": choices,
                "default": None if kind == "secret" else _plain(default),
            }
        )
    return out


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str)) if value is not None else None


def shown(secret: str) -> str:
    """What the page shows of a secret: its last four characters."""
    return "…" + secret[-4:] if len(secret) >= 8 else "…"


# ------------------------------------------------------------ the config file's keys
def file_keys(runtime: Runtime, name: str) -> set[str]:
    """The keys of `[gateway.<name>]` the config set (a user's file, the environment, a
    flag, or the packaged file through a `${VARIABLE}` that is set): they win."""
    table = runtime.settings.gateway.tables.get(name)
    if table is None:
        return set()
    origins = runtime.settings.origins
    keys = set()
    for key in table.model_fields_set:
        path = ("gateway", name, key)
        labels = [origin_of(origins, path), *(lb for p, lb in origins.items() if p[:3] == path)]
        if any(label != DEFAULT_SOURCE for label in labels):
            keys.add(key)
            continue
        packaged = packaged_value(path)
        if isinstance(packaged, str) and "${" in packaged:
            keys.add(key)  # the packaged file's ${VARIABLE}, and the variable is set
    return keys


# ------------------------------------------------------------ reading
def _row(runtime: Runtime, name: str) -> GatewaySettingsRow | None:
    with runtime.db.read() as conn:
        return repo.settings_of(conn, name)


def _secrets(runtime: Runtime, row: GatewaySettingsRow) -> dict[str, str]:
    if not row.secrets_encrypted:
        return {}
    text = runtime.llm_settings.box(create=False).decrypt(row.secrets_encrypted)
    secrets: dict[str, str] = json.loads(text)
    for value in secrets.values():
        runtime.router.redactor.add(value)
    return secrets


def effective_config(runtime: Runtime, name: str) -> BaseModel | None:
    """The table gateway `name` is built from: the config file's, with the dashboard's
    settings filling the keys the file does not set. None: nothing is configured for a
    gateway registered after the settings were loaded (its defaults apply)."""
    table = runtime.settings.gateway.tables.get(name)
    if name not in platform_gateways():
        return table
    row = _row(runtime, name)
    if row is None:
        return table
    model = model_of(name)
    base = table if table is not None else model()
    fixed = file_keys(runtime, name)
    data = {key: getattr(base, key) for key in model.model_fields}
    stored = {**row.settings, **_secrets(runtime, row)}
    data.update({k: v for k, v in stored.items() if k in model.model_fields and k not in fixed})
    try:
        return model.model_validate(data)
    except PydanticError as exc:
        raise ConfigError(
            f"the dashboard's settings of gateway {name} no longer fit: {_problem(exc)}",
            key=f"gateway.{name}",
        ) from None


def settings_view(runtime: Runtime, name: str) -> dict[str, Any]:
    """What the page and `GET /api/gateways/{name}` show of a gateway's settings: each
    key's value (a secret by its last four characters), where it comes from, the form's
    fields."""
    model = model_of(name)
    fixed = file_keys(runtime, name)
    row = _row(runtime, name)
    try:
        config = effective_config(runtime, name) or model()
    except ConfigError:
        config = runtime.settings.gateway.tables.get(name) or model()
    values: dict[str, Any] = {}
    for key in model.model_fields:
        value = getattr(config, key)
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
            values[key] = shown(secret) if secret else None
        else:
            values[key] = _plain(value.model_dump() if isinstance(value, BaseModel) else value)
    stored_keys = set(row.settings) | set(row.secrets_shown) if row is not None else set()
    return {
        "name": name,
        "values": values,
        "from_file": sorted(fixed),
        "from_dashboard": sorted(stored_keys - fixed),
        "fields": fields_of(model),
        "updated_at": row.updated_at if row is not None else None,
        "updated_by": row.updated_by if row is not None else None,
    }


def gateway_view(runtime: Runtime, chats: Any, name: str) -> dict[str, Any]:
    """`settings_view` and how the gateway runs in this process (`chats`, the process's
    opencrab.gateway.serve.ChatGateways, or None): `running`, its `link` (the running
    gateway's `connection.state`; a gateway without one is "connected" while it runs),
    its last failure to start (`error`)."""
    view = settings_view(runtime, name)
    running = chats.running.get(name) if chats is not None else None
    gateway = running[0] if running is not None else None
    connection = getattr(gateway, "connection", None)
    link = None
    if connection is not None:
        link = connection.state.as_json()
    elif gateway is not None:
        link = {"state": "connected", "since": 0, "attempts": 0}
    return {
        **view,
        "enabled": bool(view["values"].get("enabled")),
        "running": gateway is not None,
        "link": link,
        "error": chats.errors.get(name) if chats is not None else None,
    }


# ------------------------------------------------------------ writing
def save_settings(runtime: Runtime, name: str, body: dict[str, Any], *, actor: str) -> None:
    """Store the dashboard's settings of gateway `name` (they replace the stored ones; a
    secret left out or null keeps its stored value, "" removes it). ValidationError names
    the key that is unknown, set in the config file, or not of its type; nothing is
    stored then."""
    model = model_of(name)
    fixed = file_keys(runtime, name)
    secrets = set(secret_keys(model))
    for key in body:
        if key not in model.model_fields:
            raise ValidationError(f"{key}: unknown key for the {name} gateway")
    table = runtime.settings.gateway.tables.get(name) or model()
    body = {  # a file's key sent back as it is (a GET's values, PUT again) changes nothing
        k: v for k, v in body.items() if not (k in fixed and v == _plain(getattr(table, k)))
    }
    for key in fixed & set(body):
        if body[key] is not None and key not in secrets:
            raise ValidationError(
                f"{key}: set in the config file ([gateway.{name}]), which wins; change it there"
            )
    row = _row(runtime, name)
    kept = _secrets(runtime, row) if row is not None else {}
    for key in secrets & set(body):
        value = body[key]
        if value is None or (isinstance(value, str) and value.startswith("…")):
            continue  # kept (null, or what the page showed of it)
        if key in fixed:
            raise ValidationError(
                f"{key}: set in the config file ([gateway.{name}]), which wins; change it there"
            )
        if not isinstance(value, str):
            raise ValidationError(f"{key}: a secret is text")
        if value:
            kept[key] = value
        else:
            kept.pop(key, None)
    plain = {k: v for k, v in body.items() if k not in secrets and k not in fixed}
    data = {key: getattr(table, key) for key in model.model_fields}
    data.update(plain)
    data.update({k: v for k, v in kept.items() if k not in fixed})
    try:
        checked = model.model_validate(data)
    except PydanticError as exc:
        raise ValidationError(_problem(exc)) from None
    plain = {k: _plain(getattr(checked, k)) for k in plain}  # as the model reads them
    token = _box_for_writing(runtime, name).encrypt(json.dumps(kept)) if kept else None
    with runtime.db.write() as conn:
        repo.save(conn, name, plain, token, {k: shown(v) for k, v in kept.items()}, actor)
    for value in kept.values():
        runtime.router.redactor.add(value)


def _problem(exc: PydanticError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "settings"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"


def _box_for_writing(runtime: Runtime, name: str) -> SecretBox:
    """The key to encrypt `name`'s secrets with: one that decrypts every other stored
    secret (gateways', MCP servers', LLM API keys'; config.secret_key.box_for_writing)."""
    with runtime.db.read() as conn:
        stored = {
            **{f"gateway {n}'s secrets": t for n, t in repo.encrypted(conn).items() if n != name},
            **{f"MCP server {n}'s secrets": t for n, t in mcp_repo.encrypted(conn).items()},
            **{
                f"the API key of {n}": r.api_key_encrypted
                for n, r in llm_repo.providers(conn).items()
                if r.api_key_encrypted
            },
        }
    return box_for_writing(runtime.llm_settings.box, stored)
