"""Gateways' settings made on the dashboard: the one writer of `gateway_settings`.

Each function runs on the caller's connection, inside the caller's transaction. Secrets
arrive here encrypted (opencrab.config.secret_key); nothing here sees one in clear. The
rows are settings with secrets (opencrab.store.secret_settings).

Example:
    with db.write() as conn:
        save(conn, "slack", {"mode": "socket"}, token, {"bot_token": "…9f2a"}, "local")
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from opencrab.store.secret_settings import (
    all_rows,
    encrypted_secrets,
    row_of,
    save_secret_settings,
)
from opencrab.store.tables import gateway_settings


class GatewaySettingsRow(NamedTuple):
    name: str
    settings: dict[str, Any]
    secrets_encrypted: str | None
    secrets_shown: dict[str, str]
    updated_by: str
    updated_at: datetime


def all_settings(conn: Connection) -> dict[str, GatewaySettingsRow]:
    """Every stored gateway's settings, by name."""
    return all_rows(conn, gateway_settings, GatewaySettingsRow)


def settings_of(conn: Connection, name: str) -> GatewaySettingsRow | None:
    """The stored settings of gateway `name`, or None."""
    return row_of(conn, gateway_settings, name, GatewaySettingsRow)


def save(
    conn: Connection,
    name: str,
    settings: dict[str, Any],
    secrets_encrypted: str | None,
    secrets_shown: dict[str, str],
    actor: str,
) -> None:
    """Store the gateway's settings (created, or replaced whole)."""
    save_secret_settings(
        conn, gateway_settings, name, settings, secrets_encrypted, secrets_shown, actor
    )


def encrypted(conn: Connection) -> dict[str, str]:
    """The encrypted secrets of every gateway that has some, by name."""
    return encrypted_secrets(conn, gateway_settings)
