"""LLM settings changed at run time (the dashboard's "LLM設定"), layered over the config.

What the dashboard may set: a provider on or off, its API key (stored encrypted with
opencrab.config.secret_key, shown only as its last four characters), its base URL; the
model aliases; the fallback chain. The providers are the registered ones (plugins'
included); each one's facts say whether it takes a key (`key_env`) and a base URL.
Every change is written with an audit row (who, what, when — never the secret) and
applied to the running router at once: the provider is built again and the router
works out anew what can answer.

A key is tied to its origin (opencrab.llm.key_origin): a base URL on another origin
clears the stored key (audited as such) unless a key is given in the same change, and is
refused (409) while the key comes from the environment or the config file, whose base
URL is set there. A stored key that cannot be used — the secret key cannot decrypt it,
or its origin is no longer the one in effect — is not sent: the settings view says why
(`ProviderView.key_problem`) and a call to the provider fails with that reason
(`LlmRouter.key_problems`). A key is stored only with a secret key that decrypts every
other stored key (opencrab.config.secret_key), else 409 says what to do.

Precedence, for each value:
1. the command line, the environment (`OPENCRAB_…`, or a `${VAR}` the value reads) and
   the user's config file — the dashboard cannot change these: an edit is refused with
   409 naming the variable or file, and the settings view shows where the value is from;
2. the dashboard's stored value;
3. the packaged `default.toml`.

Other processes on the same database (`opencrab worker`, a second `opencrab up`) pick a
change up before their next call: every change writes audit rows in its own
transaction, so the audit table's row count and highest id are the settings' version;
each process reads it (one query) at most every `check_secs` before a call
(`LlmRouter.before_call`), and when it moved reads the settings again and builds again
only the providers whose effective configuration changed. A provider replaced while
calls run on it is closed when the last of them ends (LlmRouter.replace_provider).

Example:
    live = LiveLlmSettings(settings, db, router)
    await live.apply_stored()
    await live.update_provider("openrouter", {"api_key": "sk-or-…"}, actor="local")
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ProviderConfig
from opencrab.config.provenance import DEFAULT_SOURCE, KeyPath, packaged_value, source_kind
from opencrab.config.secret_key import ENV_VAR as SECRET_KEY_VAR
from opencrab.config.secret_key import SecretBox
from opencrab.errors import ConfigError, ConflictError, NotFoundError, ValidationError
from opencrab.llm.fallback import Target
from opencrab.llm.key_origin import origin_in_effect, origin_of
from opencrab.llm.registry import provider_facts
from opencrab.llm.router import LlmRouter
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.repositories import llm_settings as repo
from opencrab.store.repositories.llm_settings import AuditEntry

EDITABLE = ("enabled", "api_key", "base_url")
SourceName = Literal["packaged", "file", "environment", "flag", "dashboard", "unset"]
_ALIAS = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
MAX_KEY_CHARS = 500
CHECK_SECS = 2.0
"""How often, at most, a process reads the settings' version before a call."""

log = logging.getLogger(__name__)


@dataclass
class Source:
    """Where a value comes from; `locked` when the dashboard may not change it."""

    kind: SourceName
    label: str
    locked: bool


@dataclass
class ProviderView:
    name: str
    enabled: bool
    enabled_source: Source
    has_key: bool
    key_last4: str | None
    key_source: Source
    base_url: str | None
    base_url_source: Source
    takes_key: bool
    takes_base_url: bool
    key_env: str | None = None
    """The environment variable the provider's key is read from (its facts), if any."""
    key_problem: str | None = None
    """Why a key stored or configured is not used (never sent), else None."""
    needs_key: str | None = None
    """Where to set the key the user's settings need and nobody gave yet, else None."""


class LiveLlmSettings:
    """The dashboard's LLM settings over the configuration, applied to a running router."""

    def __init__(self, settings: Settings, db: Database, router: LlmRouter) -> None:
        self.settings = settings
        self.db = db
        self.router = router
        self._box: SecretBox | None = None
        self.check_secs = CHECK_SECS
        self._version: repo.Version | None = None  # what `apply_stored` last read
        self._checked_at = float("-inf")
        self._checking = asyncio.Lock()
        self._applied: dict[str, ProviderConfig] = {}  # provider -> config last built
        router.before_call = self.check

    # ------------------------------------------------------------ provenance
    def source(self, path: KeyPath) -> Source:
        """Where the value at `path` comes from, before any dashboard value."""
        labels = [
            label
            for known, label in self.settings.origins.items()
            if known[: len(path)] == path and label != DEFAULT_SOURCE
        ]
        if labels:
            kind = source_kind(labels[0])
            return Source(kind, labels[0], locked=True)
        raw = packaged_value(path)
        if isinstance(raw, str) and (var := _VAR.search(raw)) and self._config_value(path):
            # the packaged file reads this value from a variable the user exported
            return Source("environment", f"environment {var.group(1)}", locked=True)
        if raw is None:
            return Source("unset", "not set", locked=False)
        return Source("packaged", DEFAULT_SOURCE, locked=False)

    def _config_value(self, path: KeyPath) -> Any:
        node: Any = self.settings
        for part in path:
            node = node.get(part) if isinstance(node, dict) else getattr(node, str(part), None)
        return node

    def _refuse_locked(self, path: KeyPath) -> None:
        found = self.source(path)
        if found.locked:
            dotted = ".".join(str(p) for p in path)
            raise ConflictError(
                f"{dotted} is set by {found.label}; change it there (the dashboard does "
                "not override values from the command line, the environment or the config file)"
            )

    # ------------------------------------------------------------ the secret key
    def box(self, *, create: bool) -> SecretBox:
        """The key that encrypts stored API keys (loaded once)."""
        if self._box is None:
            self._box = SecretBox.load(self.settings.data_dir, create=create)
        return self._box

    def _box_for_writing(self, name: str) -> SecretBox:
        """The key to encrypt `name`'s new API key with: one that decrypts every other
        stored key (two secret keys would leave some stored keys unreadable whichever
        is kept), and a new key file only while no other key is stored. ConflictError
        says what to do otherwise; nothing is written."""
        with self.db.read() as conn:
            others = {
                n: r.api_key_encrypted
                for n, r in repo.providers(conn).items()
                if n != name and r.api_key_encrypted
            }
        try:
            box = self.box(create=not others)
        except ConfigError as exc:
            if not others:  # nothing else is stored, but the key file is unusable
                raise ConflictError(
                    f"the API key is not stored: {exc}; replace or remove the key file, "
                    f"or set {SECRET_KEY_VAR}"
                ) from None
            raise _unreadable(sorted(others), str(exc)) from None
        unreadable = [n for n, token in sorted(others.items()) if not box.decrypts(token)]
        if unreadable:
            raise _unreadable(unreadable, f"{box.source}: this key does not decrypt them")
        return box

    # ------------------------------------------------------------ effective values
    def provider_config(
        self, name: str, row: repo.ProviderRow | None
    ) -> tuple[ProviderConfig, str | None]:
        """The provider's configuration with the dashboard's values where allowed, and
        why a key is left out of it (None when none is): a key is sent only to the
        origin it belongs to, and a stored one only when it can be decrypted."""
        config = self.settings.llm.providers.get(name, ProviderConfig())
        if row is None:
            return config, None
        update: dict[str, Any] = {}
        path = ("llm", "providers", name)
        if row.enabled is not None and not self.source((*path, "enabled")).locked:
            update["enabled"] = row.enabled
        url = config.base_url
        if row.base_url and not self.source((*path, "base_url")).locked:
            update["base_url"] = url = row.base_url
        problem = None
        key_source = self.source((*path, "api_key"))
        if row.api_key_encrypted and not key_source.locked:
            key, problem = self._stored_key(name, row, url)
            update["api_key"] = None if key is None else SecretStr(key)
        elif "base_url" in update and config.api_key and config.api_key.get_secret_value():
            home = origin_in_effect(name, config.base_url)
            there = origin_of(url)
            if there != home:
                update["api_key"] = None
                problem = (
                    f"the API key of {name} from {key_source.label} is not sent to {there}: "
                    f"it is configured for {home}; set the base URL where the key is set "
                    f"({self._url_variable(name)}), or clear the dashboard's base URL"
                )
        return config.model_copy(update=update), problem

    def _stored_key(
        self, name: str, row: repo.ProviderRow, url: str | None
    ) -> tuple[str | None, str | None]:
        """(the stored key, None), or (None, why it is not used)."""
        there = origin_in_effect(name, url)
        if row.api_key_origin is not None and row.api_key_origin != there:
            return None, (
                f"the stored API key of {name} was entered for {row.api_key_origin} and is "
                f"not sent to {there}: enter the key again for the base URL in use"
            )
        assert row.api_key_encrypted is not None
        try:
            key = self.box(create=False).decrypt(row.api_key_encrypted)
        except ConfigError as exc:
            return (
                None,
                f"the stored API key of {name} cannot be decrypted: {exc}; or enter the key again",
            )
        self.router.redactor.add(key)
        return key, None

    @staticmethod
    def _url_variable(name: str) -> str:
        return (
            f"OPENCRAB_LLM__PROVIDERS__{name.upper()}__BASE_URL or "
            f"llm.providers.{name}.base_url in the config file"
        )

    def aliases(self, rows: dict[str, repo.AliasRow]) -> dict[str, Target]:
        """The aliases: configured ones with the dashboard's edits where allowed."""
        out = {a: Target(r.provider, r.model) for a, r in self.settings.llm.aliases.items()}
        for alias, row in rows.items():
            if self.source(("llm", "aliases", alias)).locked:
                continue
            if row.removed or row.provider is None or row.model is None:
                out.pop(alias, None)
            else:
                out[alias] = Target(row.provider, row.model)
        return out

    def chain(self, stored: list[str] | None) -> list[str]:
        """The fallback chain: the dashboard's unless the user's config sets it."""
        if stored is None or self.source(("llm", "fallback", "chain")).locked:
            return list(self.settings.llm.fallback.chain)
        return stored

    async def apply_stored(self) -> list[str]:
        """Apply what the dashboard stored to the router (at start-up, and when another
        process changed it); returns the problems (a stored key the secret key cannot
        read stays stored, unused). Only providers whose configuration changed are
        built again."""
        version, rows, alias_rows, stored_chain = await run_blocking(self._read_all)
        problems: list[str] = []
        changed = False
        known = provider_facts()
        for name, row in rows.items():
            if name not in known:
                continue
            config, problem = await run_blocking(self.provider_config, name, row)
            if problem is not None:
                problems.append(problem)
                log.error("%s", problem)
            changed |= await self._apply_provider(name, config, problem)
        if alias_rows:
            aliases = self.aliases(alias_rows)
            if aliases != self.router.aliases:
                self.router.set_aliases(aliases)
        if stored_chain is not None:
            self.router.set_fallback_chain(self.chain(stored_chain))
        if changed:
            await self.router.refresh()
        self._version = version
        return problems

    def require_keys(self, problems: list[str]) -> None:
        """Raise ConfigError for each provider the user's settings use whose key is
        neither in the environment nor stored here (`Settings.keys_needed`); `problems`
        are those `apply_stored` returned (a stored key that cannot be used), each
        named after its provider's. The `llm` commands ask this; the server starts
        without the key instead (`keys_missing`)."""
        missing = []
        for name, problem in self.settings.keys_needed.items():
            config = self._applied.get(name)
            if config is not None and config.api_key and config.api_key.get_secret_value():
                continue
            missing.append(problem)
            missing += [p for p in problems if p == self.router.key_problems.get(name)]
        if missing:
            raise ConfigError("\n".join(missing))

    async def _apply_provider(
        self, name: str, config: ProviderConfig, key_problem: str | None
    ) -> bool:
        """Build the provider again when `config` differs from what was last built;
        `key_problem` is what a call to it is told when it has no key for that reason."""
        if key_problem is None:
            self.router.key_problems.pop(name, None)
        else:
            self.router.key_problems[name] = key_problem
        if self._applied.get(name) == config:
            return False
        await self.router.replace_provider(name, config)
        self._applied[name] = config
        return True

    async def check(self) -> None:
        """Pick up changes made by another process: at most every `check_secs`, read
        the settings' version and, when it moved, apply the stored settings again."""
        if time.monotonic() - self._checked_at < self.check_secs:
            return
        async with self._checking:
            if time.monotonic() - self._checked_at < self.check_secs:
                return  # checked while this call waited for the lock
            self._checked_at = time.monotonic()
            try:
                version = await run_blocking(self._read_version)
                if version != self._version:
                    await self.apply_stored()
            except Exception:
                # the call goes ahead with the settings it has; the next check tries again
                log.exception("reading the stored LLM settings failed")

    def _read_version(self) -> repo.Version:
        with self.db.read() as conn:
            return repo.version(conn)

    def _read_all(
        self,
    ) -> tuple[
        repo.Version, dict[str, repo.ProviderRow], dict[str, repo.AliasRow], list[str] | None
    ]:
        with self.db.read() as conn:
            # the version first: what follows is at least that new, so nothing is missed
            version = repo.version(conn)
            return version, repo.providers(conn), repo.aliases(conn), repo.chain(conn)

    # ------------------------------------------------------------ views
    def provider_views(self) -> list[ProviderView]:
        """Every provider with its values and where each comes from; never a key."""
        with self.db.read() as conn:
            rows = repo.providers(conn)
        return [self._view(name, rows.get(name)) for name in provider_facts()]

    def effective_provider(self, name: str) -> tuple[ProviderConfig, str | None]:
        """The provider's configuration in effect now (the stored row read afresh, so a
        key entered in another process counts) and why a key is left out, as
        `provider_config` gives them."""
        return self.provider_config(name, self._row(name))

    def _row(self, name: str) -> repo.ProviderRow | None:
        with self.db.read() as conn:
            return repo.providers(conn).get(name)

    def _view(self, name: str, row: repo.ProviderRow | None) -> ProviderView:
        facts = provider_facts()[name]
        path = ("llm", "providers", name)
        config = self.settings.llm.providers.get(name, ProviderConfig())
        sources = {field: self.source((*path, field)) for field in EDITABLE}
        dashboard = Source("dashboard", "dashboard", locked=False)
        enabled = config.enabled is not False
        if row is not None and row.enabled is not None and not sources["enabled"].locked:
            enabled, sources["enabled"] = row.enabled, dashboard
        effective, key_problem = self.provider_config(name, row)
        key = effective.api_key.get_secret_value() if effective.api_key else ""
        last4: str | None = key[-4:] if len(key) >= 8 else None
        has_key = bool(key)
        if row is not None and row.api_key_encrypted and not sources["api_key"].locked:
            last4, sources["api_key"] = row.api_key_last4, dashboard
        base_url = config.base_url
        if row is not None and row.base_url and not sources["base_url"].locked:
            base_url, sources["base_url"] = row.base_url, dashboard
        return ProviderView(
            name=name,
            enabled=enabled,
            enabled_source=sources["enabled"],
            has_key=has_key,
            key_last4=last4,
            key_source=sources["api_key"],
            base_url=base_url,
            base_url_source=sources["base_url"],
            takes_key=facts.key_env is not None,
            takes_base_url=facts.base_url,
            key_env=facts.key_env,
            key_problem=key_problem,
            needs_key=(
                self.settings.keys_needed.get(name) if not has_key and not key_problem else None
            ),
        )

    def keys_missing(self) -> dict[str, str]:
        """Providers the user's settings use that have no key yet, each with where to set
        one (the server runs without them; a call to one fails with that text)."""
        if not self.settings.keys_needed:
            return {}
        return {v.name: v.needs_key for v in self.provider_views() if v.needs_key}

    def alias_views(self) -> list[tuple[str, Target, Source]]:
        """Every alias in effect with where it comes from."""
        with self.db.read() as conn:
            rows = repo.aliases(conn)
        out = []
        for alias, target in sorted(self.aliases(rows).items()):
            found = self.source(("llm", "aliases", alias))
            if alias in rows and not found.locked:
                found = Source("dashboard", "dashboard", locked=False)
            out.append((alias, target, found))
        return out

    def chain_view(self) -> tuple[list[str], Source]:
        """The fallback chain in effect and where it comes from."""
        with self.db.read() as conn:
            stored = repo.chain(conn)
        found = self.source(("llm", "fallback", "chain"))
        if stored is not None and not found.locked:
            return stored, Source("dashboard", "dashboard", locked=False)
        return list(self.settings.llm.fallback.chain), found

    def audit_log(self, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
        """Recorded changes, newest first."""
        with self.db.read() as conn:
            return repo.audit_log(conn, limit=limit, offset=offset)

    # ------------------------------------------------------------ changes
    async def update_provider(
        self, name: str, changes: dict[str, Any], *, actor: str
    ) -> str | None:
        """Set `enabled`, `api_key` ("" or None clears) and/or `base_url` of a provider;
        returns why the stored key was cleared (its base URL moved to another origin
        without a key given again), else None."""
        known = provider_facts()
        if name not in known:
            raise NotFoundError(f"no provider {name!r} (registered: {', '.join(known)})")
        path = ("llm", "providers", name)
        if not changes:
            raise ValidationError("nothing to change: give enabled, apiKey or baseUrl")
        before = await run_blocking(self._row, name)
        now = await run_blocking(self._view, name, before)
        config = self.settings.llm.providers.get(name, ProviderConfig())
        if changes.get("enabled") == now.enabled:
            changes.pop("enabled")  # a form sends its switch as it is: nothing changed
        if "base_url" in changes and ((changes["base_url"] or "").strip() or None) == now.base_url:
            changes.pop("base_url")
        columns: dict[str, Any] = {}
        audit: list[AuditEntry] = []
        target = f"providers.{name}"
        if "enabled" in changes:
            self._refuse_locked((*path, "enabled"))
            columns["enabled"] = changes["enabled"]
            audit.append(AuditEntry(actor, f"{target}.enabled", "set", str(changes["enabled"])))
        if "base_url" in changes:
            if not known[name].base_url:
                raise ValidationError(f"provider {name!r} takes no base URL")
            self._refuse_locked((*path, "base_url"))
            url = (changes["base_url"] or "").strip() or None
            if url is not None and not re.match(r"^https?://[^\s/]+", url):
                raise ValidationError(f"base URL {url!r} is not an http(s) URL")
            columns["base_url"] = url
            audit.append(
                AuditEntry(actor, f"{target}.base_url", "set" if url else "clear", url or "")
            )
        if "base_url" in changes:
            there = origin_in_effect(name, columns["base_url"] or config.base_url)
            self._refuse_config_key_elsewhere(name, there)
        else:
            there = origin_in_effect(name, now.base_url)
        key_cleared = None
        if "base_url" in changes and "api_key" not in changes and before is not None:
            was = before.api_key_origin or origin_in_effect(name, now.base_url)
            if before.api_key_encrypted and was != there:
                key_cleared = (
                    f"the stored API key of {name} was cleared: it was entered for {was}, "
                    f"and {there} is another origin; enter the key again to use it there"
                )
                for column in ("api_key_encrypted", "api_key_last4", "api_key_origin"):
                    columns[column] = None
                detail = f"the base URL moved to another origin: {was} -> {there}"
                audit.append(AuditEntry(actor, f"{target}.api_key", "clear", detail))
        if "api_key" in changes:
            if known[name].key_env is None:
                raise ValidationError(f"provider {name!r} takes no API key")
            self._refuse_locked((*path, "api_key"))
            key = (changes["api_key"] or "").strip()
            if len(key) > MAX_KEY_CHARS or any(c.isspace() for c in key):
                raise ValidationError(
                    f"an API key has no spaces and at most {MAX_KEY_CHARS} characters"
                )
            if key and len(key) < 8:
                raise ValidationError("an API key has at least 8 characters")
            if key:
                self.router.redactor.add(key)
                box = await run_blocking(self._box_for_writing, name)
                columns["api_key_encrypted"] = box.encrypt(key)
                columns["api_key_last4"] = key[-4:]
                columns["api_key_origin"] = there
                audit.append(AuditEntry(actor, f"{target}.api_key", "set", f"…{key[-4:]}"))
            else:
                for column in ("api_key_encrypted", "api_key_last4", "api_key_origin"):
                    columns[column] = None
                audit.append(AuditEntry(actor, f"{target}.api_key", "clear", ""))
        if not columns:
            return None

        def write() -> repo.ProviderRow:
            with self.db.write() as conn:
                repo.save_provider(conn, name, columns)
                repo.audit(conn, audit)
                return repo.providers(conn)[name]

        row = await run_blocking(write)
        config, problem = await run_blocking(self.provider_config, name, row)
        if await self._apply_provider(name, config, problem):
            await self.router.refresh()
        return key_cleared

    def _refuse_config_key_elsewhere(self, name: str, there: str | None) -> None:
        """ConflictError when the provider's key comes from the environment or the
        config file and `there` is not the origin configured with it: the dashboard
        moves no key it cannot change (both are set in the same place)."""
        config = self.settings.llm.providers.get(name, ProviderConfig())
        source = self.source(("llm", "providers", name, "api_key"))
        if not (source.locked and config.api_key and config.api_key.get_secret_value()):
            return
        home = origin_in_effect(name, config.base_url)
        if there != home:
            raise ConflictError(
                f"the API key of {name} is set by {source.label} for {home}; a base URL "
                f"on another origin ({there}) would take the key there: set the base URL "
                f"where the key is set ({self._url_variable(name)})"
            )

    async def set_alias(
        self, alias: str, provider: str | None, model: str | None, *, actor: str
    ) -> None:
        """Add or change an alias; provider and model None remove it."""
        if not _ALIAS.match(alias):
            raise ValidationError(
                f"alias {alias!r}: 1-64 letters, digits, '_', '.' or '-' (no spaces)"
            )
        self._refuse_locked(("llm", "aliases", alias))
        if provider is not None:
            known = provider_facts()
            if provider not in known:
                raise ValidationError(
                    f"unknown provider {provider!r} (registered: {', '.join(known)})"
                )
            if not (model or "").strip():
                raise ValidationError("an alias needs a model")
            model = (model or "").strip()
        elif alias not in self.router.aliases:
            raise NotFoundError(f"no alias {alias!r}")
        entry = (
            AuditEntry(actor, f"aliases.{alias}", "set", f"{provider}/{model}")
            if provider is not None
            else AuditEntry(actor, f"aliases.{alias}", "remove", "")
        )

        def write() -> dict[str, repo.AliasRow]:
            with self.db.write() as conn:
                repo.save_alias(conn, alias, provider, model if provider else None)
                repo.audit(conn, [entry])
                return repo.aliases(conn)

        self.router.set_aliases(self.aliases(await run_blocking(write)))

    async def set_chain(self, entries: list[str], *, actor: str) -> None:
        """Order the fallback chain: providers, aliases or provider/model entries."""
        self._refuse_locked(("llm", "fallback", "chain"))
        clean = [e.strip() for e in entries]
        known = provider_facts()
        for entry in clean:
            head = entry.split("/", 1)[0]
            if entry not in self.router.aliases and head not in known:
                raise ValidationError(
                    f"fallback entry {entry!r} is neither a provider, an alias nor provider/model"
                )
        if len(set(clean)) != len(clean):
            raise ValidationError("a fallback entry appears twice")

        def write() -> None:
            with self.db.write() as conn:
                repo.save_chain(conn, clean)
                repo.audit(conn, [AuditEntry(actor, "fallback.chain", "set", " > ".join(clean))])

        await run_blocking(write)
        self.router.set_fallback_chain(clean)


def _unreadable(providers: list[str], reason: str) -> ConflictError:
    """Why a key is not stored while other stored keys cannot be decrypted."""
    return ConflictError(
        f"the API key is not stored: the stored keys of {', '.join(providers)} cannot be "
        f"decrypted ({reason}); set {SECRET_KEY_VAR} to the key they were stored with "
        "(or restore the key file), or remove those stored keys first"
    )
