"""MCP servers added in the dashboard: the one writer of `mcp_servers`.

Each function runs on the caller's connection, inside the caller's transaction. The
secrets arrive here encrypted (opencrab.config.secret_key); nothing here sees one in
clear. `revisions` is what every process reads to see that a server was added, edited
or removed (opencrab.mcp.client.stored).

Example:
    with db.write() as conn:
        save(conn, "tracker", {"url": "https://…/mcp"}, token, {"bearer_token": "…9f2a"}, "local")
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

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


def _row(r: Any) -> McpServerRow:
    return McpServerRow(
        r.name,
        dict(r.config_json),
        r.secrets_encrypted,
        dict(r.secrets_shown_json),
        int(r.revision),
        r.updated_by,
        r.created_at,
        r.updated_at,
    )


def servers(conn: Connection) -> dict[str, McpServerRow]:
    """Every stored server by name."""
    rows = conn.execute(sa.select(*mcp_servers.c).order_by(mcp_servers.c.name)).all()
    return {r.name: _row(r) for r in rows}


def server(conn: Connection, name: str) -> McpServerRow | None:
    """The stored server `name`, or None."""
    found = conn.execute(sa.select(*mcp_servers.c).where(mcp_servers.c.name == name)).first()
    return None if found is None else _row(found)


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
    table = mcp_servers
    now = datetime.now(UTC)
    values = {
        "config_json": config,
        "secrets_encrypted": secrets_encrypted,
        "secrets_shown_json": secrets_shown,
        "updated_by": actor,
        "updated_at": now,
    }
    done = conn.execute(
        table.update()
        .where(table.c.name == name)
        .values(revision=table.c.revision + 1, **values)
        .returning(table.c.revision)
    ).first()
    if done is not None:
        return int(done.revision)
    conn.execute(table.insert().values(name=name, revision=1, created_at=now, **values))
    return 1


def remove(conn: Connection, name: str) -> bool:
    """Delete the server; whether there was one."""
    done = conn.execute(mcp_servers.delete().where(mcp_servers.c.name == name))
    return bool(done.rowcount)


def encrypted(conn: Connection) -> dict[str, str]:
    """The encrypted secrets of every server that has some, by name."""
    table = mcp_servers
    rows = conn.execute(
        sa.select(table.c.name, table.c.secrets_encrypted).where(
            table.c.secrets_encrypted.is_not(None)
        )
    ).all()
    return {str(name): str(token) for name, token in rows}
