"""Settings with secrets: the rows of a table where the dashboard saves a named thing's
settings, its secrets kept apart as one encrypted token and shown by their last four
characters (`gateway_settings`, `mcp_servers`).

Such a table has `name` (its key), one JSON column of the settings but the secrets
(`settings_json`, `config_json`), `secrets_encrypted` (a Fernet token, or NULL: the
callers encrypt and decrypt, with opencrab.config.secret_key; nothing here sees a secret
in clear), `secrets_shown_json` (what the page shows of them), `updated_by` and
`updated_at`; with a `revision` column each save counts one more, with `created_at` the
first save sets it. The table's repository stays its one writer (docs/architecture.md):
it hands its table to these functions, each run on the caller's connection inside the
caller's transaction. A row comes back as the repository's NamedTuple, whose fields are
the table's columns, a JSON column's named without `_json`.

Example (store/repositories/gateway_settings.py):
    with db.write() as conn:
        save_secret_settings(conn, gateway_settings, "slack", {"mode": "socket"}, token,
                             {"bot_token": "…9f2a"}, "local")
    with db.read() as conn:
        row = row_of(conn, gateway_settings, "slack", GatewaySettingsRow)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

R = TypeVar("R")

SHOWN = "secrets_shown_json"


def _settings_column(table: sa.Table) -> str:
    """The table's JSON column of the settings but the secrets."""
    (column,) = [c.name for c in table.c if c.name.endswith("_json") and c.name != SHOWN]
    return column


def _row(r: Any, row_type: Callable[..., R]) -> R:
    fields = {
        str(column).removesuffix("_json"): dict(value) if str(column).endswith("_json") else value
        for column, value in r._mapping.items()
    }
    return row_type(**fields)


def all_rows(conn: Connection, table: sa.Table, row_type: Callable[..., R]) -> dict[str, R]:
    """Every row of the table by name, in name order."""
    rows = conn.execute(sa.select(*table.c).order_by(table.c.name)).all()
    return {r.name: _row(r, row_type) for r in rows}


def row_of(conn: Connection, table: sa.Table, name: str, row_type: Callable[..., R]) -> R | None:
    """The row `name`, or None."""
    found = conn.execute(sa.select(*table.c).where(table.c.name == name)).first()
    return None if found is None else _row(found, row_type)


def save_secret_settings(
    conn: Connection,
    table: sa.Table,
    name: str,
    settings: dict[str, Any],
    secrets_encrypted: str | None,
    secrets_shown: dict[str, Any],
    actor: str,
) -> int | None:
    """Store the row `name` (created, or replaced whole); its revision (1 when created,
    one higher at each save), None on a table without revisions."""
    now = datetime.now(UTC)
    values = {
        _settings_column(table): settings,
        "secrets_encrypted": secrets_encrypted,
        SHOWN: secrets_shown,
        "updated_by": actor,
        "updated_at": now,
    }
    revised = "revision" in table.c
    update = table.update().where(table.c.name == name)
    if revised:
        done = conn.execute(
            update.values(revision=table.c.revision + 1, **values).returning(table.c.revision)
        ).first()
        if done is not None:
            return int(done.revision)
    elif conn.execute(update.values(**values)).rowcount:
        return None
    first: dict[str, Any] = {"revision": 1} if revised else {}
    if "created_at" in table.c:
        first["created_at"] = now
    conn.execute(table.insert().values(name=name, **first, **values))
    return 1 if revised else None


def encrypted_secrets(conn: Connection, table: sa.Table) -> dict[str, str]:
    """The encrypted secrets of every row that has some, by name."""
    rows = conn.execute(
        sa.select(table.c.name, table.c.secrets_encrypted).where(
            table.c.secrets_encrypted.is_not(None)
        )
    ).all()
    return {str(name): str(token) for name, token in rows}
