"""MCP servers added in the dashboard: stored, validated, encrypted, started and stopped
while the process runs.

A server added on the MCP page (`POST /api/mcp/servers`) is a row of `mcp_servers`
(store/repositories/mcp_servers.py): the settings of a `[mcp.servers.<name>]` table but
the secrets, which are kept apart — a bearer token, secret header values and secret
environment values — encrypted together as one Fernet token with the key that encrypts
the LLM API keys (opencrab.config.secret_key), and shown only by their last four
characters. A secret is never returned, never logged: each one read or saved is added to
the router's redactor, which filters every log line and every error this module shows.

A config table of the same name wins: the stored server is not started, and the page
says so (`shadowed`). `bearer_token_env` is the config file's way; the dashboard stores
the token itself.

Each process keeps its dashboard servers in step with the table (`StoredMcpServers`):
`sync` starts a server that was added, stops one that was removed and restarts one whose
revision moved, through the tool-source seam (core/tool_sources.py: its tools are
mirrored to the `tools` table, so they can be granted). The process that saved a change
syncs at once; every other one (`opencrab worker`, a second `up`) within `poll_secs`.

Example:
    stored = StoredMcpServers(runtime, sources)
    await stored.sync()
    save_server(runtime, "tracker", {"url": "https://…/mcp", "bearerToken": "…"}, actor="local")
    await stored.sync()  # tracker starts; its tools are offered
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from opencrab.config.mcp import ENV_NAME, SERVER_NAME, McpServerConfig
from opencrab.config.secret_key import SecretBox, box_for_writing
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import RunningToolSources
from opencrab.errors import ConfigError, ConflictError, NotFoundError, ValidationError
from opencrab.mcp.client.source import McpServerSource
from opencrab.offload import run_blocking
from opencrab.store.repositories import llm_settings as llm_repo
from opencrab.store.repositories import mcp_servers as repo
from opencrab.store.repositories.mcp_servers import McpServerRow

log = logging.getLogger(__name__)

POLL_SECS = 3.0
"""How often a process reads the stored servers' revisions."""

STDIO_FIELDS = ("command", "args", "env", "read_paths", "network")
HTTP_FIELDS = ("url", "headers", "allow_private")
COMMON_FIELDS = ("call_timeout_secs", "start_timeout_secs")
SECRET_FIELDS = ("bearer_token", "secret_headers", "secret_env")
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_ITEMS = 100
MAX_TEXT = 4000
SHOWN_CHARS = 4
MIN_SHOWN_LEN = 8  # a shorter secret is shown as •••• alone


@dataclass
class Secrets:
    """A server's secrets in clear (only in memory, only while they are used)."""

    bearer_token: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def values(self) -> list[str]:
        return [v for v in (self.bearer_token, *self.headers.values(), *self.env.values()) if v]

    def as_json(self) -> str:
        return json.dumps(
            {"bearer_token": self.bearer_token, "headers": self.headers, "env": self.env}
        )

    @classmethod
    def from_json(cls, text: str) -> Secrets:
        data = json.loads(text)
        return cls(str(data.get("bearer_token") or ""), dict(data["headers"]), dict(data["env"]))

    def shown(self) -> dict[str, Any]:
        """What the page may show: each secret's last four characters (or nothing)."""
        return {
            "bearer_token": _last4(self.bearer_token) if self.bearer_token else None,
            "headers": {k: _last4(v) for k, v in self.headers.items()},
            "env": {k: _last4(v) for k, v in self.env.items()},
        }


def _last4(secret: str) -> str:
    return secret[-SHOWN_CHARS:] if len(secret) >= MIN_SHOWN_LEN else ""


# ------------------------------------------------------------ checking what is saved
def server_name(name: str) -> str:
    """`name` when it can be a server's name, else ValidationError naming the rule."""
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise ValidationError(
            f"name: {str(name)[:60]!r} is no server name: use 1 to 40 letters, digits, '-' "
            "or single '_' (it becomes the tool namespace mcp__<name>)"
        )
    return name


def _check_map(field_name: str, values: dict[str, str], names: re.Pattern[str]) -> None:
    if len(values) > MAX_ITEMS:
        raise ValidationError(f"{field_name}: at most {MAX_ITEMS} entries")
    for key, value in values.items():
        if not names.fullmatch(key):
            raise ValidationError(f"{field_name}: {key[:60]!r} is no valid name")
        if len(value) > MAX_TEXT or CONTROL.search(value):
            raise ValidationError(
                f"{field_name}: {key}: at most {MAX_TEXT} characters, no line breaks or "
                "control characters"
            )
        if names is HEADER_NAME and not value.isascii():
            raise ValidationError(
                f"{field_name}: {key}: a header value is ASCII (encode other text, e.g. "
                "percent-encoded)"
            )


def checked(body: dict[str, Any], old: Secrets | None) -> tuple[dict[str, Any], Secrets]:
    """The stored settings and the secrets of a saved server (`body` in the API's
    snake_case; a secret left out, or an empty secret header or env value, keeps what
    `old` has, an empty `bearer_token` removes it). ValidationError names the field in
    the API's camelCase."""
    stdio = bool(body.get("command"))
    wanted = (*(STDIO_FIELDS if stdio else HTTP_FIELDS), *COMMON_FIELDS)
    other = HTTP_FIELDS if stdio else STDIO_FIELDS
    for key in other:
        if body.get(key) not in (None, "", [], {}, False):
            kind = "an HTTP server (url)" if key in HTTP_FIELDS else "a stdio server (command)"
            raise ValidationError(
                f"{to_camel(key)}: a setting of {kind}; this server is the other kind"
            )
    config = {k: body[k] for k in wanted if body.get(k) is not None}
    for key in ("args", "read_paths"):
        items = config.get(key, [])
        if len(items) > MAX_ITEMS or any(len(i) > MAX_TEXT or "\x00" in i for i in items):
            raise ValidationError(
                f"{to_camel(key)}: at most {MAX_ITEMS} items of at most {MAX_TEXT} characters"
            )
    headers = dict(config.get("headers", {}))
    _check_map("headers", headers, HEADER_NAME)
    _check_map("env", dict(config.get("env", {})), ENV_NAME)
    if any(k.lower() == "authorization" for k in headers):
        raise ValidationError(
            "headers: Authorization: give it as bearerToken or in secretHeaders, so it is "
            "stored encrypted and never shown"
        )
    old = old or Secrets()
    secret_headers = dict(body.get("secret_headers") or {})
    secret_env = dict(body.get("secret_env") or {})
    _check_map("secretHeaders", secret_headers, HEADER_NAME)
    _check_map("secretEnv", secret_env, ENV_NAME)
    token = body.get("bearer_token")
    if token is not None and (len(token) > MAX_TEXT or CONTROL.search(token)):
        raise ValidationError(f"bearerToken: at most {MAX_TEXT} characters, no line breaks")
    secrets = Secrets(
        bearer_token=old.bearer_token if token is None else token,
        headers={k: v or old.headers.get(k, "") for k, v in secret_headers.items()},
        env={k: v or old.env.get(k, "") for k, v in secret_env.items()},
    )
    for kind, values in (("secretHeaders", secrets.headers), ("secretEnv", secrets.env)):
        empty = [k for k, v in values.items() if not v]
        if empty:
            raise ValidationError(f"{kind}: {empty[0]}: give its value (it has none stored)")
    if stdio and (token or secret_headers):
        field_name = "bearerToken" if token else "secretHeaders"
        raise ValidationError(f"{field_name}: a setting of an HTTP server (url); this one is stdio")
    if not stdio and secret_env:
        raise ValidationError("secretEnv: a setting of a stdio server (command); this one is HTTP")
    if stdio:  # a server that changed its transport keeps none of the other kind's secrets
        secrets.bearer_token, secrets.headers = "", {}
    else:
        secrets.env = {}
    clash = set(headers) & set(secrets.headers) or set(config.get("env", {})) & set(secrets.env)
    if clash:
        raise ValidationError(f"{sorted(clash)[0]}: set both in clear and as a secret; keep one")
    runnable(config, secrets)  # the whole table as the client will take it
    return config, secrets


def runnable(config: dict[str, Any], secrets: Secrets) -> McpServerConfig:
    """The configuration the client runs the server with: the stored settings and the
    secrets (a bearer token as the Authorization header). ValidationError names a field."""
    table = dict(config)
    if secrets.headers or secrets.bearer_token:
        table["headers"] = {**table.get("headers", {}), **secrets.headers}
        if secrets.bearer_token:
            table["headers"]["Authorization"] = f"Bearer {secrets.bearer_token}"
    if secrets.env:
        table["env"] = {**table.get("env", {}), **secrets.env}
    try:
        return McpServerConfig(**table)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(to_camel(str(p)) for p in first["loc"]) or (
            "command" if "command" in table else "url"
        )
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ValidationError(f"{where}: {message}") from None


# ------------------------------------------------------------ the secret key
def _box(runtime: Runtime, *, create: bool) -> SecretBox:
    return runtime.llm_settings.box(create=create)


def _box_for_writing(runtime: Runtime, name: str) -> SecretBox:
    """The key to encrypt `name`'s secrets with: one that decrypts every other stored
    secret (MCP servers' and LLM API keys'; config.secret_key.box_for_writing)."""
    with runtime.db.read() as conn:
        others = {n: t for n, t in repo.encrypted(conn).items() if n != name}
        keys = {
            f"the API key of {n}": r.api_key_encrypted
            for n, r in llm_repo.providers(conn).items()
            if r.api_key_encrypted
        }
    stored = {**{f"the secrets of MCP server {n}": t for n, t in others.items()}, **keys}
    return box_for_writing(runtime.llm_settings.box, stored)


def stored_secrets(runtime: Runtime, row: McpServerRow) -> Secrets:
    """The row's secrets in clear (added to the redactor); ConfigError when the key
    cannot decrypt them."""
    if not row.secrets_encrypted:
        return Secrets()
    text = _box(runtime, create=False).decrypt(row.secrets_encrypted)
    secrets = Secrets.from_json(text)
    for value in secrets.values():
        runtime.router.redactor.add(value)
    return secrets


# ------------------------------------------------------------ changes
def config_names(runtime: Runtime) -> set[str]:
    """The servers the config file names (they win over stored ones of the same name)."""
    return set(runtime.settings.mcp.servers)


def save_server(
    runtime: Runtime, name: str, body: dict[str, Any], *, actor: str, create: bool
) -> int:
    """Add (`create`) or replace the stored server `name`; its new revision.

    ValidationError names a wrong field; ConflictError when `create` finds the name
    taken (stored, or a config table's), NotFoundError when an edit finds no stored one.
    """
    server_name(name)
    if name in config_names(runtime):
        raise ConflictError(
            f"MCP server {name!r} is set in the config file ([mcp.servers.{name}]), which "
            "wins; change it there, or choose another name"
        )
    with runtime.db.read() as conn:
        row = repo.server(conn, name)
    if create and row is not None:
        raise ConflictError(f"an MCP server named {name!r} exists; edit it, or choose another name")
    if not create and row is None:
        raise NotFoundError(f"no MCP server {name!r} added in the dashboard")
    old = None
    if row is not None and row.secrets_encrypted:
        try:
            old = stored_secrets(runtime, row)
        except ConfigError as exc:
            # unreadable: an edit that would keep them must give them again
            if (
                body.get("bearer_token") is None
                and row.secrets_shown.get("bearer_token") is not None
            ):
                raise ConflictError(
                    f"bearerToken: the stored secrets of MCP server {name!r} cannot be "
                    f"decrypted ({exc}); enter the token again, or restore the key"
                ) from None
    config, secrets = checked(body, old)
    for value in secrets.values():
        runtime.router.redactor.add(value)
    token = None
    if secrets.values():
        token = _box_for_writing(runtime, name).encrypt(secrets.as_json())
    with runtime.db.write() as conn:
        revision = repo.save(conn, name, config, token, secrets.shown(), actor)
    log.info("MCP server %s saved by %s (revision %d)", name, actor, revision)
    return revision


def remove_server(runtime: Runtime, name: str, *, actor: str) -> None:
    """Delete the stored server `name` (NotFoundError when there is none; a config
    table's is ConflictError: it is removed from the config file)."""
    with runtime.db.write() as conn:
        removed = repo.remove(conn, name)
    if not removed:
        if name in config_names(runtime):
            raise ConflictError(
                f"MCP server {name!r} is set in the config file ([mcp.servers.{name}]); "
                "remove it there"
            )
        raise NotFoundError(f"no MCP server {name!r} added in the dashboard")
    log.info("MCP server %s removed by %s", name, actor)


# ------------------------------------------------------------ one process's servers
class StoredMcpServers:
    """The dashboard's MCP servers running in one process (see the module docstring)."""

    def __init__(self, runtime: Runtime, sources: RunningToolSources) -> None:
        self.runtime = runtime
        self.sources = sources
        self.running: dict[str, tuple[int, McpServerSource]] = {}  # name -> (revision, source)
        self.problems: dict[str, str] = {}  # name -> why it is not running here
        self.seen: dict[str, int] = {}  # name -> the revision the last sync read
        self.poll_secs = POLL_SECS
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def source(self, name: str) -> McpServerSource | None:
        """The running source of server `name`, the config's or the dashboard's."""
        if name in self.running:
            return self.running[name][1]
        if name not in config_names(self.runtime):
            return None  # (a dashboard server being stopped is still attached a moment)
        for source in self.sources.attached:
            if isinstance(source, McpServerSource) and source.server == name:
                return source
        return None

    def config_sources(self) -> dict[str, McpServerSource]:
        """The config file's servers running in this process, by name."""
        ours = {s for _, s in self.running.values()}
        return {
            s.server: s
            for s in self.sources.attached
            if isinstance(s, McpServerSource) and s not in ours
        }

    async def sync(self) -> None:
        """Start, restart and stop servers so that this process runs the stored ones."""
        async with self._lock:
            rows = await run_blocking(self._rows)
            shadowed = config_names(self.runtime)
            for name in list(self.running):
                row = rows.get(name)
                if row is None or name in shadowed or row.revision != self.running[name][0]:
                    await self._stop(name)
            for name, row in rows.items():
                if name in shadowed:
                    self.problems[name] = (
                        f"not started: the config file's [mcp.servers.{name}] has this name "
                        "and wins"
                    )
                elif name not in self.running:
                    await self._start(row)
            for name in set(self.problems) - set(rows):
                self.problems.pop(name)
            self.seen = {name: row.revision for name, row in rows.items()}

    def _rows(self) -> dict[str, McpServerRow]:
        with self.runtime.db.read() as conn:
            return repo.servers(conn)

    async def _start(self, row: McpServerRow) -> None:
        self.problems.pop(row.name, None)
        try:
            secrets = await run_blocking(stored_secrets, self.runtime, row)
            config = runnable(row.config, secrets)
        except (ConfigError, ValidationError, ValueError) as exc:
            problem = self.runtime.router.redactor.redact(f"not started: {exc}")
            log.error("MCP server %s %s", row.name, problem)
            self.problems[row.name] = problem
            return
        source = McpServerSource(row.name, config, self.runtime.settings)
        self.running[row.name] = (row.revision, source)
        await self.sources.add(source, self.runtime.notices)

    async def _stop(self, name: str) -> None:
        _, source = self.running.pop(name)
        await self.sources.remove(source)

    def start_watching(self) -> None:
        """Sync every `poll_secs` in a task, for changes made by another process."""
        self._task = asyncio.create_task(self._watch(), name="mcp-stored-servers")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_secs)
            try:
                if await run_blocking(self._revisions) != self.seen:
                    await self.sync()
            except Exception:
                log.exception("reading the stored MCP servers failed; trying again")

    def _revisions(self) -> dict[str, int]:
        with self.runtime.db.read() as conn:
            return repo.revisions(conn)

    async def stop(self) -> None:
        """Stop watching and stop every dashboard server (the config's stop with the rest)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        async with self._lock:
            for name in list(self.running):
                await self._stop(name)
