"""LLM settings made in the dashboard: the one writer of `llm_provider_settings`,
`llm_alias_settings`, `llm_chain_settings` and `llm_settings_audit`.

Every function runs on the caller's connection, inside the caller's transaction, so a
change and its audit rows are written together; that makes the audit table's row count
and highest id (`version`) the version of the settings, which every process checks.
API keys arrive here encrypted (opencrab.config.secret_key); nothing here ever sees one
in clear.

Example:
    with db.write() as conn:
        save_provider(conn, "openai", {"enabled": False})
        audit(conn, [AuditEntry("local", "providers.openai.enabled", "set", "false")])
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import (
    llm_alias_settings,
    llm_chain_settings,
    llm_provider_settings,
    llm_settings_audit,
)

Version = tuple[int, int]
"""(audit rows, highest audit id): moves with every change (see `version`)."""
PROVIDER_FIELDS = ("enabled", "api_key_encrypted", "api_key_last4", "base_url", "api_key_origin")


class ProviderRow(NamedTuple):
    provider: str
    enabled: bool | None
    api_key_encrypted: str | None
    api_key_last4: str | None
    base_url: str | None
    updated_at: datetime
    api_key_origin: str | None = None  # scheme://host[:port] the key was entered for


class AliasRow(NamedTuple):
    alias: str
    provider: str | None
    model: str | None
    removed: bool
    updated_at: datetime


class AuditEntry(NamedTuple):
    actor: str
    target: str
    action: str  # set, clear, remove
    detail: str
    at: datetime | None = None  # filled in when read back


def version(conn: Connection) -> Version:
    """The settings' version: the audit rows' count and highest id (every change
    writes audit rows in its transaction; the count catches a change whose lower id
    commits after a higher one)."""
    table = llm_settings_audit
    count, top = conn.execute(sa.select(sa.func.count(), sa.func.max(table.c.id))).one()
    return int(count), int(top or 0)


def providers(conn: Connection) -> dict[str, ProviderRow]:
    """Every provider's stored settings by name."""
    rows = conn.execute(sa.select(*llm_provider_settings.c)).all()
    return {r.provider: ProviderRow(*r) for r in rows}


def save_provider(conn: Connection, name: str, changes: dict[str, Any]) -> None:
    """Set the given columns of the provider's row (created when missing)."""
    unknown = set(changes) - set(PROVIDER_FIELDS)
    assert not unknown, f"not provider settings: {unknown}"
    values = {**changes, "updated_at": datetime.now(UTC)}
    table = llm_provider_settings
    done = conn.execute(table.update().where(table.c.provider == name).values(**values))
    if done.rowcount == 0:
        conn.execute(table.insert().values(provider=name, **values))


def encrypted_keys(conn: Connection) -> int:
    """How many providers have an encrypted key stored."""
    table = llm_provider_settings
    query = sa.select(sa.func.count()).where(table.c.api_key_encrypted.is_not(None))
    return int(conn.execute(query).scalar_one())


def aliases(conn: Connection) -> dict[str, AliasRow]:
    """Every alias edit by alias name (removed ones included)."""
    rows = conn.execute(sa.select(*llm_alias_settings.c)).all()
    return {r.alias: AliasRow(*r) for r in rows}


def save_alias(conn: Connection, alias: str, provider: str | None, model: str | None) -> None:
    """Store an alias edit; provider and model None mark the alias removed."""
    table = llm_alias_settings
    values = {
        "provider": provider,
        "model": model,
        "removed": provider is None,
        "updated_at": datetime.now(UTC),
    }
    done = conn.execute(table.update().where(table.c.alias == alias).values(**values))
    if done.rowcount == 0:
        conn.execute(table.insert().values(alias=alias, **values))


def chain(conn: Connection) -> list[str] | None:
    """The stored fallback chain, or None when the dashboard never set one."""
    found = conn.execute(sa.select(llm_chain_settings.c.chain_json)).scalar_one_or_none()
    return None if found is None else [str(entry) for entry in found]


def save_chain(conn: Connection, entries: list[str]) -> None:
    """Store the fallback chain."""
    table = llm_chain_settings
    values = {"chain_json": list(entries), "updated_at": datetime.now(UTC)}
    done = conn.execute(table.update().where(table.c.id == 1).values(**values))
    if done.rowcount == 0:
        conn.execute(table.insert().values(id=1, **values))


def audit(conn: Connection, entries: list[AuditEntry]) -> None:
    """Record who changed what (now)."""
    if not entries:
        return
    now = datetime.now(UTC)
    conn.execute(
        llm_settings_audit.insert(),
        [
            {
                "at": now,
                "actor": e.actor,
                "target": e.target,
                "action": e.action,
                "detail": e.detail,
            }
            for e in entries
        ],
    )


def audit_log(conn: Connection, *, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
    """Recorded changes, newest first."""
    table = llm_settings_audit
    rows = conn.execute(
        sa.select(table.c.actor, table.c.target, table.c.action, table.c.detail, table.c.at)
        .order_by(table.c.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return [AuditEntry(*r) for r in rows]
