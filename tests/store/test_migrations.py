"""Migrations: blank → head builds exactly the declared tables; SQLite runs in WAL mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from opencrab.core.memory import index_pending
from opencrab.store import Database, migrate
from opencrab.store import tables as t
from opencrab.store.dialects.sqlite import is_fts_object
from opencrab.store.types import utcnow


def _include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (type_ == "table" and name is not None and is_fts_object(name))


def test_blank_to_head_matches_declared_tables(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'blank.db'}")
    assert db.current_revision() is None
    db.upgrade()
    assert db.current_revision() == migrate.head()
    with db.read() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": _include, "compare_type": True}
        )
        assert compare_metadata(context, t.metadata) == []
        names = set(sa.inspect(conn).get_table_names())
    assert set(t.metadata.tables) <= names
    expected_001 = {
        "soul",
        "identity",
        "memory_curated",
        "memory_sessions",
        "skills",
        "impressions",
        "llm_usage_metrics",
        "model_pricing",
        "heartbeat_log",
        "sessions",
        "agent_sessions",
    }
    expected_002 = {"agents", "tools", "agent_tools", "tickets", "steps", "sessions", "messages"}
    assert expected_001 | expected_002 | {"events", "memory_sessions_fts"} <= names
    db.close()


def test_upgrade_is_idempotent_and_downgrade_removes_everything(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    db.upgrade()
    db.upgrade()
    migrate.downgrade(db, "base")
    assert db.current_revision() is None
    with db.read() as conn:
        left = set(sa.inspect(conn).get_table_names()) - {"alembic_version"}
    assert left == set()
    db.upgrade()
    assert db.current_revision() == migrate.head()
    db.close()


def test_sqlite_runs_in_wal_with_busy_timeout_and_foreign_keys(db: Database) -> None:
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def _agent(conn: sa.Connection, agent_id: str = "a1") -> None:
    now = utcnow()
    conn.execute(
        t.agents.insert(),
        {"id": agent_id, "name": "Ada", "prompt": "be kind", "created_at": now, "updated_at": now},
    )


def _log(conn: sa.Connection, text: str) -> None:
    conn.execute(
        t.memory_sessions.insert(),
        {
            "agent_id": "a1",
            "session_id": "s1",
            "log_type": "speech",
            "content": text,
            "created_at": utcnow(),
        },
    )


def _search(db: Database, query: str) -> list[str]:
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT content FROM memory_sessions_fts WHERE memory_sessions_fts MATCH ?",
            (query,),
        )
        return [r[0] for r in rows]


def _index_is_consistent(db: Database) -> None:
    with db.write() as conn:  # FTS5 raises if the index and the logs disagree
        conn.exec_driver_sql(
            "INSERT INTO memory_sessions_fts(memory_sessions_fts) VALUES ('integrity-check')"
        )


def test_fts_index_follows_memory_logs_in_any_language(db: Database) -> None:
    with db.write() as conn:
        _agent(conn)
        for text in (
            "今日は記憶のテストをしました",
            "we discussed prime heartbeats",
            "讨论了记忆系统",
        ):
            _log(conn, text)
    assert _search(db, "heartbeats") == []  # queued, not indexed yet
    assert index_pending(db) == 3
    assert index_pending(db) == 0
    assert _search(db, '"記憶のテスト"') == ["今日は記憶のテストをしました"]
    assert _search(db, '"记忆系统"') == ["讨论了记忆系统"]
    assert _search(db, "heartbeats") == ["we discussed prime heartbeats"]
    with db.write() as conn:
        conn.execute(
            t.memory_sessions.update()
            .where(t.memory_sessions.c.content.like("we%"))
            .values(content="we changed the topic")
        )
    assert _search(db, "heartbeats") == []
    assert _search(db, "topic") == ["we changed the topic"]
    _index_is_consistent(db)
    with db.write() as conn:  # deleting the agent cascades to its logs and their index
        conn.execute(t.agents.delete())
    assert _search(db, "topic") == []
    _index_is_consistent(db)
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.memory_sessions)).scalar() == 0


def test_queued_lines_can_change_or_go_before_they_are_indexed(db: Database) -> None:
    with db.write() as conn:
        _agent(conn)
        _log(conn, "first indexed line")
    index_pending(db)
    with db.write() as conn:
        _log(conn, "draft thought")
        _log(conn, "doomed line")
        m = t.memory_sessions.c
        conn.execute(
            t.memory_sessions.update()
            .where(m.content == "draft thought")
            .values(content="final thought")
        )
        conn.execute(t.memory_sessions.delete().where(m.content == "doomed line"))
        conn.execute(t.memory_sessions.delete().where(m.content == "first indexed line"))
        _log(conn, "reused id line")  # SQLite may hand out a deleted row's id again
    _index_is_consistent(db)
    assert index_pending(db) == 2
    _index_is_consistent(db)
    assert _search(db, "thought") == ["final thought"]
    assert _search(db, "draft") == []
    assert _search(db, "doomed") == []
    assert _search(db, "first") == []
    assert _search(db, "reused") == ["reused id line"]


def test_timestamps_round_trip_as_aware_utc(db: Database) -> None:
    with db.write() as conn:
        _agent(conn)
    with db.read() as conn:
        row = conn.execute(sa.select(t.agents.c.created_at)).one()
    assert row.created_at.utcoffset() is not None
    assert row.created_at.utcoffset().total_seconds() == 0


def test_check_constraints_keep_seed_vocabularies(db: Database) -> None:
    import pytest

    with db.write() as conn:
        _agent(conn)
    now = utcnow()
    with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
        conn.execute(
            t.tickets.insert(),
            {
                "id": "t1",
                "agent_id": "a1",
                "status": "paused",
                "created_at": now,
                "updated_at": now,
            },
        )
    with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
        conn.execute(
            t.sessions.insert(),
            {"id": "s1", "kind": "ticket", "created_at": now, "updated_at": now},
        )


def test_0010_names_the_speakers_of_stored_messages_and_indexes_heartbeat_log(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(db, "0007")
    now = utcnow()
    with db.write() as conn:
        _agent(conn)
        conn.exec_driver_sql(
            "INSERT INTO sessions (id, kind, status, agent_id, turn_number, "
            "participant_ids_json, done_count, created_at, updated_at) "
            "VALUES ('s1', 'chat', 'active', 'a1', 0, '[]', 0, ?, ?)",
            (str(now), str(now)),
        )
        for event, speaker, role in (("e1", "u-9", "user"), ("e2", "a1", "assistant")):
            conn.exec_driver_sql(
                "INSERT INTO memory_sessions (agent_id, session_id, log_type, content, "
                "speaker_id, event_id, created_at) VALUES ('a1', 's1', 'speech', 'x', ?, ?, ?)",
                (speaker, event, str(now)),
            )
            conn.exec_driver_sql(
                "INSERT INTO messages (session_id, role, content, timestamp, event_id) "
                "VALUES ('s1', ?, 'x', ?, ?)",
                (role, str(now), event),
            )
        conn.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s1', 'system', 'no event', ?)",
            (str(now),),
        )
    db.upgrade()
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                t.messages.c.speaker_id, t.messages.c.speaker_name, t.messages.c.interrupted
            ).order_by(t.messages.c.id)
        ).all()
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("heartbeat_log")}
    assert [tuple(r) for r in rows] == [
        ("u-9", None, False),
        ("a1", "Ada", False),
        (None, None, False),
    ]
    assert "idx_heartbeat_agent" in indexes
    db.close()
