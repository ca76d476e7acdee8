"""The MCP servers repository (servers added on the dashboard) on SQLite and PostgreSQL."""

from __future__ import annotations

from opencrab.store import Database
from opencrab.store.repositories import mcp_servers


def test_a_server_is_saved_replaced_with_a_new_revision_and_removed(any_db: Database) -> None:
    config = {"url": "https://tracker.example.org/mcp", "headers": {"X-Team": "カニ"}}
    shown = {"bearer_token": "9f2a", "headers": {}, "env": {}}
    with any_db.write() as conn:
        assert mcp_servers.save(conn, "tracker", config, "gAAAA-token", shown, "local") == 1
        assert mcp_servers.save(conn, "files", {"command": "npx"}, None, {}, "ops") == 1
    with any_db.read() as conn:
        row = mcp_servers.server(conn, "tracker")
        assert mcp_servers.revisions(conn) == {"files": 1, "tracker": 1}
        assert mcp_servers.encrypted(conn) == {"tracker": "gAAAA-token"}
    assert row is not None
    assert (row.config, row.secrets_shown, row.updated_by) == (config, shown, "local")
    with any_db.write() as conn:
        changed = {**config, "allow_private": True}
        assert mcp_servers.save(conn, "tracker", changed, None, {}, "ops") == 2
    with any_db.read() as conn:
        again = mcp_servers.server(conn, "tracker")
        assert list(mcp_servers.servers(conn)) == ["files", "tracker"]
        assert mcp_servers.encrypted(conn) == {}
    assert again is not None
    assert (again.revision, again.config["allow_private"], again.updated_by) == (2, True, "ops")
    assert again.created_at == row.created_at
    with any_db.write() as conn:
        assert mcp_servers.remove(conn, "tracker")
        assert not mcp_servers.remove(conn, "tracker")
    with any_db.read() as conn:
        assert mcp_servers.revisions(conn) == {"files": 1}
        assert mcp_servers.server(conn, "tracker") is None
