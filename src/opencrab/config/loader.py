"""Load the layered configuration: packaged default < user file < environment < flags.

Each layer is a TOML-shaped dict; every leaf remembers which layer set it, so an invalid
value is reported with the file (or environment variable) it came from and its key, and
the loaded Settings keep that record (`Settings.origin`, opencrab.config.provenance).

- user file: `--config PATH`, else `OPENCRAB_CONFIG`
- environment: `OPENCRAB_SECTION__KEY=value` (`__` separates levels; the value is read
  as a TOML number, boolean, array or inline table when it looks like one, else as a
  string); `OPENCRAB_HOME` sets `data_dir`
- `[gateway.<name>]` tables are checked by the config model of the gateway registered
  under that name (opencrab.config.gateways); an unknown name or key is an error
- `${VAR}` / `${VAR:-fallback}` in any string expand from the environment; `$${` is a
  literal `${`. A missing variable is an error only where it is used: always outside
  `[llm.providers.*]` and `[gateway.*]`; for a gateway when it is enabled; for a
  provider when your own file, environment or flags use it (default_provider,
  llm.models, the fallback chain, or `enabled = true`). The packaged defaults alone
  never demand a key. With `stored_keys=True` (every command), a provider's API key
  that only the packaged `${VAR}` would give may instead be stored in the dashboard:
  the problem is kept in `Settings.keys_needed`; the server starts anyway, shows the
  provider as needing a key, and a call to it fails saying where to set one (the `llm`
  commands refuse to run: opencrab.llm.live_settings.require_keys).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from opencrab.config.gateways import gateway_problems
from opencrab.config.models import PURPOSES, Settings, reference_problems
from opencrab.config.provenance import DEFAULT_SOURCE, KeyPath, origin_of, packaged_layer
from opencrab.errors import ConfigError

ENV_PREFIX = "OPENCRAB_"
RESERVED_ENV = {
    "OPENCRAB_CONFIG",
    "OPENCRAB_HOME",
    "OPENCRAB_TEST_PG_URL",
    "OPENCRAB_SECRET_KEY",
    "OPENCRAB_INBOX_WEBHOOK_SECRET",  # the inbox webhook's signing secret, not a setting
}
_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOML_LITERAL = re.compile(
    r"^\s*([\[{]|[+-]?\d[\d_]*(\.\d+)?([eE][+-]?\d+)?\s*$|true\s*$|false\s*$)"
)


@dataclass
class _Merged:
    """The merged tree and, for each leaf, the label of the layer that set it."""

    data: dict[str, Any] = field(default_factory=dict)
    origins: dict[KeyPath, str] = field(default_factory=dict)

    def apply(self, layer: Mapping[str, Any], source: str, prefix: KeyPath = ()) -> None:
        target = self.data
        for part in prefix:
            target = target.setdefault(str(part), {})
        for key, value in layer.items():
            path = (*prefix, key)
            if isinstance(value, Mapping) and isinstance(target.get(key), dict):
                self.apply(value, source, path)
            else:
                target[key] = _plain(value)
                self._forget_below(path)
                self.origins[path] = source

    def _forget_below(self, path: KeyPath) -> None:
        n = len(path)
        for known in [p for p in self.origins if len(p) > n and p[:n] == path]:
            del self.origins[known]

    def origin(self, path: KeyPath) -> str:
        """The layer that set `path`, or the nearest enclosing key that was set."""
        return origin_of(self.origins, path)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    stored_keys: bool = False,
) -> Settings:
    """Build the effective Settings, raising ConfigError naming source, key and problem;
    with `stored_keys`, a missing provider key the dashboard may store is left to the
    runtime to check (`Settings.keys_needed`).

    Example:
        settings = load_settings("my.toml", overrides={"gateway": {"rest": {"port": 9000}}})
    """
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    merged = _Merged()
    merged.apply(packaged_layer(), DEFAULT_SOURCE)

    path = config_file if config_file is not None else env.get("OPENCRAB_CONFIG") or None
    if path is not None:
        file = Path(path).expanduser()
        label = str(file)
        if not file.is_file():
            raise ConfigError("config file not found", source=label)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file: {exc}", source=label) from exc
        merged.apply(_read_toml_text(text, label), label)

    for name, value in _env_layer(env):
        merged.apply(_nest(name, value), f"environment {name}")
    if env.get("OPENCRAB_HOME"):
        merged.apply({"data_dir": env["OPENCRAB_HOME"]}, "environment OPENCRAB_HOME")
    if overrides:
        merged.apply(overrides, "command line")

    missing = _expand_all(merged, env)
    settings = _validate(merged)
    keys_needed = _check_missing(settings, merged, missing, stored_keys=stored_keys)
    problems = reference_problems(settings)
    if problems:
        raise ConfigError(
            "\n".join(f"{merged.origin(p)}: {_dotted(p)}: {why}" for p, why in problems)
        )
    data_dir = (cwd / settings.data_dir.expanduser()).resolve()
    settings.data_dir = data_dir
    settings.database.path = settings.database.path.replace("{data_dir}", str(data_dir))
    settings.agent.workspace_path = settings.agent.workspace_path.replace(
        "{data_dir}", str(data_dir)
    )
    settings._origins = dict(merged.origins)
    settings._keys_needed = keys_needed
    return settings


def _read_toml_text(text: str, label: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=label) from exc


def _env_layer(env: Mapping[str, str]) -> list[tuple[str, Any]]:
    out = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in RESERVED_ENV:
            continue
        out.append((name, _env_value(name, env[name])))
    return out


def _env_value(name: str, raw: str) -> Any:
    if not _TOML_LITERAL.match(raw):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid value {raw!r}: {exc}", source=f"environment {name}") from exc


def _nest(name: str, value: Any) -> dict[str, Any]:
    parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
    if not all(parts):
        raise ConfigError("empty key part; use OPENCRAB_SECTION__KEY", source=f"environment {name}")
    out: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def _expand_all(merged: _Merged, env: Mapping[str, str]) -> dict[KeyPath, str]:
    """Expand `${VAR}` in every string; drop values whose variable is unset.

    Returns {key path: variable name} for the dropped values, checked later against use.
    """
    missing: dict[KeyPath, str] = {}

    def expand(text: str, path: KeyPath) -> str | None:
        absent: list[str] = []

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$${":
                return "${"
            var, fallback = m.group(1), m.group(2)
            if var in env:
                return env[var]
            if fallback is not None:
                return fallback
            absent.append(var)
            return ""

        result = _VAR.sub(sub, text)
        if absent:
            missing[path] = absent[0]
            return None
        return result

    def walk(node: Any, path: KeyPath) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                new = walk(value, (*path, key))
                if new is not None or value is None:
                    out[key] = new
            return out
        if isinstance(node, list):
            return [walk(v, (*path, i)) for i, v in enumerate(node)]
        if isinstance(node, str) and "$" in node:
            return expand(node, path)
        return node

    merged.data = walk(merged.data, ())
    return missing


def _validate(merged: _Merged) -> Settings:
    gateways = gateway_problems(merged.data.get("gateway", {}))  # each by its own model
    if gateways:
        raise ConfigError(
            "\n".join(f"{merged.origin(p)}: {_dotted(p)}: {why}" for p, why in gateways)
        )
    try:
        return Settings.model_validate(merged.data)
    except pydantic.ValidationError as exc:
        lines = []
        for err in exc.errors():
            path: KeyPath = tuple(err["loc"])
            lines.append(f"{merged.origin(path)}: {_dotted(path)}: {_explain(err)}")
        raise ConfigError("\n".join(lines)) from None


def _explain(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        what = "section" if isinstance(err.get("input"), dict) else "key"
        return f"unknown {what}"
    got = err.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{err['msg']}{shown}"


def _dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check_missing(
    settings: Settings, merged: _Merged, missing: dict[KeyPath, str], *, stored_keys: bool
) -> dict[str, str]:
    """Raise for every missing variable a used value needs; with `stored_keys`, return
    instead the problems a key stored in the dashboard would solve, by provider."""
    used = _used_providers(settings, merged)
    problems = []
    deferred: dict[str, str] = {}
    for path, var in missing.items():
        section = path[:3] if path[:2] == ("llm", "providers") else path[:2]
        if section[:2] == ("llm", "providers") and len(section) == 3:
            name = str(section[2])
            if name not in used:
                continue
            why = f"provider {name!r} is used ({used[name]})"
        elif section[:1] == ("gateway",) and len(section) == 2:
            gateway = getattr(settings.gateway, str(section[1]), None)
            if gateway is None or not getattr(gateway, "enabled", False):
                continue
            why = f"gateway {section[1]!r} is enabled"
        else:
            why = "this key is always used"
        where = f"{merged.origin(path)}: {_dotted(path)}: environment variable {var}"
        dashboard = (
            len(path) == 4
            and path[:2] == ("llm", "providers")
            and path[3] == "api_key"
            and merged.origin(path) == DEFAULT_SOURCE  # the user's own layers win
        )
        if dashboard and stored_keys:
            deferred[str(path[2])] = (
                f"{path[2]} needs an API key ({why}): enter one on the dashboard's LLM "
                f"settings page (/settings/llm), set llm.providers.{path[2]}.api_key in your "
                f"config file, or export {var}"
            )
            continue
        problems.append(f"{where} is not set and {why}; export {var} or change the setting")
    if problems:
        raise ConfigError("\n".join(problems))
    return deferred


def _used_providers(settings: Settings, merged: _Merged) -> dict[str, str]:
    """Providers the user's own layers rely on, each with the key that uses it."""
    llm = settings.llm
    used: dict[str, str] = {}

    def mine(path: KeyPath) -> bool:
        return merged.origin(path) != DEFAULT_SOURCE

    if mine(("llm", "default_provider")):
        used.setdefault(llm.default_provider, "llm.default_provider")
    for purpose in PURPOSES:
        ref = getattr(llm.models, purpose)
        if ref is not None and mine(("llm", "models", purpose, "provider")):
            used.setdefault(ref.provider, f"llm.models.{purpose}")
    for i, entry in enumerate(llm.fallback.chain):
        if mine(("llm", "fallback", "chain", i)):
            alias = llm.aliases.get(entry)
            name = alias.provider if alias is not None else entry.split("/", 1)[0]
            used.setdefault(name, "llm.fallback.chain")
    for name, provider in llm.providers.items():
        if provider.enabled:
            used.setdefault(name, f"llm.providers.{name}.enabled")
    return used
