"""MCP servers added in the dashboard: the one writer of `mcp_servers`.

Each function runs on the caller's connection, inside the caller's transaction. The
secrets arrive here encrypted (opencrab.config.secret_key); nothing here sees one in
clear. The rows are settings with secrets (opencrab.store.secret_settings) with a
revision: `revisions` is what every process reads to see that a server was added,
edited or removed (opencrab.mcp.client.stored).

Example:
    with db.write() as conn:
        save(conn, "tracker", {"url": "https://…/mcp"}, token, {"bearer_token": "…9f2a"}, "local")
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.secret_settings import (
    all_rows,
    encrypted_secrets,
    row_of,
    save_secret_settings,
)
from opencrab.store.tables import mcp_servers


class McpServerRow(NamedTuple):
    name: str
    config: dict[str, Any]
    secrets_encrypted: str | None
    secrets_shown: dict[str, Any]
    revision: int
    updated_by: str
    created_at: datetime
    updated_at: datetime


def servers(conn: Connection) -> dict[str, McpServerRow]:
    """Every stored server by name."""
    return all_rows(conn, mcp_servers, McpServerRow)


def server(conn: Connection, name: str) -> McpServerRow | None:
    """The stored server `name`, or None."""
    return row_of(conn, mcp_servers, name, McpServerRow)


def revisions(conn: Connection) -> dict[str, int]:
    """Each stored server's revision, by name: what a process compares with what runs."""
    rows = conn.execute(sa.select(mcp_servers.c.name, mcp_servers.c.revision)).all()
    return {name: int(revision) for name, revision in rows}


def save(
    conn: Connection,
    name: str,
    config: dict[str, Any],
    secrets_encrypted: str | None,
    secrets_shown: dict[str, Any],
    actor: str,
) -> int:
    """Store the server (created, or replaced with its revision one higher); its revision."""
    revision = save_secret_settings(
        conn, mcp_servers, name, config, secrets_encrypted, secrets_shown, actor
    )
    assert revision is not None  # mcp_servers keeps revisions
    return revision


def remove(conn: Connection, name: str) -> bool:
    """Delete the server; whether there was one."""
    done = conn.execute(mcp_servers.delete().where(mcp_servers.c.name == name))
    return bool(done.rowcount)


def encrypted(conn: Connection) -> dict[str, str]:
    """The encrypted secrets of every server that has some, by name."""
    return encrypted_secrets(conn, mcp_servers)
