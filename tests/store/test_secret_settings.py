"""Settings with secrets (opencrab.store.secret_settings), the rows of `gateway_settings`
(no revision) and `mcp_servers` (a revision and a creation time), on SQLite and
PostgreSQL: through the building block itself and through each table's repository."""

from __future__ import annotations

import pytest

from opencrab.store import Database
from opencrab.store.repositories import gateway_settings
from opencrab.store.repositories.gateway_settings import GatewaySettingsRow as Row
from opencrab.store.repositories.mcp_servers import McpServerRow as RevisedRow
from opencrab.store.secret_settings import (
    all_rows,
    encrypted_secrets,
    row_of,
    save_secret_settings,
)
from opencrab.store.tables import gateway_settings as gateway_table
from opencrab.store.tables import mcp_servers as mcp_table


def test_a_row_is_created_replaced_whole_and_read_back_by_name(any_db: Database) -> None:
    settings = {"mode": "socket", "channels": ["一般", "random"]}
    with any_db.write() as conn:
        assert (
            save_secret_settings(
                conn, gateway_table, "slack", settings, "gAAAA-1", {"bot_token": "…9f2a"}, "local"
            )
            is None
        )
        save_secret_settings(conn, gateway_table, "line", {"port": 8443}, None, {}, "ops")
    with any_db.read() as conn:
        first = row_of(conn, gateway_table, "slack", Row)
        assert list(all_rows(conn, gateway_table, Row)) == ["line", "slack"]
        assert encrypted_secrets(conn, gateway_table) == {"slack": "gAAAA-1"}
        assert row_of(conn, gateway_table, "telegram", Row) is None
    assert first is not None
    assert (first.settings, first.secrets_shown, first.updated_by) == (
        settings,
        {"bot_token": "…9f2a"},
        "local",
    )
    with any_db.write() as conn:  # replaced whole: the old settings and token are gone
        save_secret_settings(conn, gateway_table, "slack", {"mode": "http"}, None, {}, "ops")
    with any_db.read() as conn:
        again = row_of(conn, gateway_table, "slack", Row)
        assert encrypted_secrets(conn, gateway_table) == {}
    assert again is not None
    assert (again.settings, again.secrets_encrypted, again.secrets_shown) == (
        {"mode": "http"},
        None,
        {},
    )
    assert (again.updated_by, again.updated_at >= first.updated_at) == ("ops", True)


def test_a_revised_table_counts_each_save_and_keeps_its_creation_time(any_db: Database) -> None:
    shown = {"bearer_token": "9f2a", "headers": {}, "env": {}}
    with any_db.write() as conn:
        assert save_secret_settings(conn, mcp_table, "tracker", {"url": "u"}, "t", shown, "a") == 1
    with any_db.write() as conn:
        assert save_secret_settings(conn, mcp_table, "tracker", {"url": "v"}, None, {}, "b") == 2
        assert save_secret_settings(conn, mcp_table, "files", {"command": "x"}, None, {}, "c") == 1
    with any_db.read() as conn:
        rows = all_rows(conn, mcp_table, RevisedRow)
    tracker = rows["tracker"]
    assert (tracker.config, tracker.revision, tracker.updated_by) == ({"url": "v"}, 2, "b")
    assert tracker.created_at <= tracker.updated_at
    assert rows["files"].revision == 1


def _save_in_a_failing_transaction(db: Database) -> None:
    with db.write() as conn:
        gateway_settings.save(conn, "slack", {"mode": "http"}, None, {}, "ops")
        raise RuntimeError("the caller's transaction fails after the save")


def test_a_failed_save_leaves_the_stored_row_as_it_was(any_db: Database) -> None:
    with any_db.write() as conn:
        gateway_settings.save(conn, "slack", {"mode": "socket"}, "gAAAA-1", {}, "local")
    with pytest.raises(RuntimeError, match="fails after the save"):
        _save_in_a_failing_transaction(any_db)
    with any_db.read() as conn:
        kept = gateway_settings.settings_of(conn, "slack")
        assert gateway_settings.encrypted(conn) == {"slack": "gAAAA-1"}
        assert list(gateway_settings.all_settings(conn)) == ["slack"]
    assert kept is not None
    assert (kept.settings, kept.updated_by) == ({"mode": "socket"}, "local")
