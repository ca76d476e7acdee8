"""Gateways' settings made on the dashboard: the one writer of `gateway_settings`.

Each function runs on the caller's connection, inside the caller's transaction. Secrets
arrive here encrypted (opencrab.config.secret_key); nothing here sees one in clear.

Example:
    with db.write() as conn:
        save(conn, "slack", {"mode": "socket"}, token, {"bot_token": "…9f2a"}, "local")
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import gateway_settings


class GatewaySettingsRow(NamedTuple):
    name: str
    settings: dict[str, Any]
    secrets_encrypted: str | None
    secrets_shown: dict[str, str]
    updated_by: str
    updated_at: datetime


def _row(r: Any) -> GatewaySettingsRow:
    return GatewaySettingsRow(
        r.name,
        dict(r.settings_json),
        r.secrets_encrypted,
        dict(r.secrets_shown_json),
        r.updated_by,
        r.updated_at,
    )


def all_settings(conn: Connection) -> dict[str, GatewaySettingsRow]:
    """Every stored gateway's settings, by name."""
    table = gateway_settings
    rows = conn.execute(sa.select(*table.c).order_by(table.c.name)).all()
    return {r.name: _row(r) for r in rows}


def settings_of(conn: Connection, name: str) -> GatewaySettingsRow | None:
    """The stored settings of gateway `name`, or None."""
    table = gateway_settings
    found = conn.execute(sa.select(*table.c).where(table.c.name == name)).first()
    return None if found is None else _row(found)


def save(
    conn: Connection,
    name: str,
    settings: dict[str, Any],
    secrets_encrypted: str | None,
    secrets_shown: dict[str, str],
    actor: str,
) -> None:
    """Store the gateway's settings (created, or replaced whole)."""
    table = gateway_settings
    values = {
        "settings_json": settings,
        "secrets_encrypted": secrets_encrypted,
        "secrets_shown_json": secrets_shown,
        "updated_by": actor,
        "updated_at": datetime.now(UTC),
    }
    done = conn.execute(table.update().where(table.c.name == name).values(**values))
    if not done.rowcount:
        conn.execute(table.insert().values(name=name, **values))


def encrypted(conn: Connection) -> dict[str, str]:
    """The encrypted secrets of every gateway that has some, by name."""
    table = gateway_settings
    rows = conn.execute(
        sa.select(table.c.name, table.c.secrets_encrypted).where(
            table.c.secrets_encrypted.is_not(None)
        )
    ).all()
    return {str(name): str(token) for name, token in rows}
