"""Migrations: blank → head builds exactly the declared tables on SQLite and on PostgreSQL;
SQLite runs in WAL mode; the main tables round-trip on both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from opencrab.auth import Scope, TokenStore, hash_token
from opencrab.core.memory import index_pending
from opencrab.errors import ConfigError
from opencrab.store import Database, migrate
from opencrab.store import tables as t
from opencrab.store.dialects.postgresql import SEARCH_INDEX, is_search_object, is_vector_column
from opencrab.store.dialects.sqlite import is_fts_object
from opencrab.store.types import UtcDateTime, utcnow


def _include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    if name is None:
        return True
    if type_ == "table":
        return not is_fts_object(name)
    if type_ == "column":
        return not is_vector_column(obj, name)
    return not (type_ == "index" and is_search_object(name))


def test_blank_to_head_matches_declared_tables(store_url: str) -> None:
    db = Database(store_url)
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
    assert expected_001 | expected_002 | {"events"} <= names
    if db.dialect == "sqlite":
        assert "memory_sessions_fts" in names
    db.close()


def test_postgresql_indexes_memory_logs_by_trigram(pg_url: str) -> None:
    db = Database(pg_url)
    db.upgrade()
    with db.read() as conn:
        indexes = {i["name"]: i for i in sa.inspect(conn).get_indexes("memory_sessions")}
        extensions = {r[0] for r in conn.exec_driver_sql("SELECT extname FROM pg_extension")}
        method = conn.exec_driver_sql(
            "SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
            "WHERE c.relname = %s",
            (SEARCH_INDEX,),
        ).scalar()
    assert "pg_trgm" in extensions
    assert indexes[SEARCH_INDEX]["column_names"] == ["content"]
    assert method == "gin"
    migrate.downgrade(db, "base")
    with db.read() as conn:
        assert (
            conn.exec_driver_sql(
                "SELECT 1 FROM pg_class WHERE relname = %s", (SEARCH_INDEX,)
            ).first()
            is None
        )
    db.close()


def test_upgrade_is_idempotent_and_downgrade_removes_everything(store_url: str) -> None:
    db = Database(store_url)
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


def test_timestamps_round_trip_as_aware_utc(any_db: Database) -> None:
    db = any_db
    with db.write() as conn:
        _agent(conn)
    with db.read() as conn:
        row = conn.execute(sa.select(t.agents.c.created_at)).one()
    assert row.created_at.utcoffset() is not None
    assert row.created_at.utcoffset().total_seconds() == 0


def test_check_constraints_keep_seed_vocabularies(any_db: Database) -> None:
    db = any_db
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


def test_main_tables_round_trip(any_db: Database) -> None:
    """Agents, sessions with messages, memory logs, metrics and events come back as written:
    JSON, booleans, aware UTC times, autoincrement ids, non-ASCII text."""
    db = any_db
    when = datetime(2026, 2, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=9)))
    llm = {"model": "gpt-5-mini", "temperature": 0.3, "fallbacks": ["a", "b"]}
    with db.write() as conn:
        conn.execute(
            t.agents.insert(),
            {
                "id": "a1",
                "name": "秋",
                "prompt": "考える",
                "llm_config_json": llm,
                "heartbeat_json": None,
                "created_at": when,
                "updated_at": when,
            },
        )
        conn.execute(
            t.sessions.insert(),
            {
                "id": "s1",
                "kind": "discussion",
                "agent_id": "a1",
                "theme": "记忆",
                "participant_ids_json": ["a1", "a2"],
                "context": {"nested": {"n": 1}},
                "created_at": when,
                "updated_at": when,
            },
        )
        ids = [
            conn.execute(
                t.messages.insert().returning(t.messages.c.id),
                {
                    "session_id": "s1",
                    "role": role,
                    "content": text,
                    "timestamp": when,
                    "interrupted": role == "assistant",
                },
            ).scalar_one()
            for role, text in (("user", "こんにちは"), ("assistant", "你好"))
        ]
        conn.execute(
            t.memory_sessions.insert(),
            {
                "agent_id": "a1",
                "session_id": "s1",
                "log_type": "speech",
                "content": "二文字",
                "metadata_json": {"k": [1, 2]},
                "created_at": when,
            },
        )
        conn.execute(
            t.llm_usage_metrics.insert(),
            {
                "id": "m1",
                "agent_id": "a1",
                "session_id": "s1",
                "timestamp": when,
                "provider": "openai",
                "model": "gpt-5-mini",
                "purpose": "conversation",
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "estimated_cost_usd": 0.00125,
                "latency_ms": 40,
                "task_success": True,
                "stream": True,
                "created_at": when,
            },
        )
    with db.read() as conn:
        agent = conn.execute(sa.select(t.agents)).one()
        session = conn.execute(sa.select(t.sessions)).one()
        messages = conn.execute(sa.select(t.messages).order_by(t.messages.c.id)).all()
        log = conn.execute(sa.select(t.memory_sessions)).one()
        metric = conn.execute(sa.select(t.llm_usage_metrics)).one()
    assert (agent.name, agent.llm_config_json, agent.heartbeat_json) == ("秋", llm, None)
    assert agent.created_at == when
    assert agent.created_at.tzinfo == UTC
    assert session.participant_ids_json == ["a1", "a2"]
    assert session.context == {"nested": {"n": 1}}
    assert (session.theme, session.turn_number, session.status) == ("记忆", 0, "active")
    assert ids[1] > ids[0]
    assert [(m.id, m.content, m.interrupted) for m in messages] == [
        (ids[0], "こんにちは", False),
        (ids[1], "你好", True),
    ]
    assert (log.content, log.metadata_json, log.id) == ("二文字", {"k": [1, 2]}, 1)
    assert (metric.task_success, metric.stream, metric.attempt) == (True, True, 1)
    assert metric.estimated_cost_usd == 0.00125
    assert (metric.status, metric.cost_source) == ("ok", "pricing")
    assert metric.timestamp == when


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u@localhost/crab", "postgresql+psycopg"),
        ("postgres://u@localhost/crab", "postgresql+psycopg"),
        ("postgresql+psycopg://u@localhost/crab", "postgresql+psycopg"),
    ],
)
def test_postgresql_urls_use_psycopg_3(url: str, driver: str) -> None:
    db = Database(url)  # connects only when first used
    assert (db.url.drivername, db.dialect) == (driver, "postgresql")
    db.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [("mysql://u:secret@localhost/crab", "not mysql"), ("not a url", "not a database URL")],
)
def test_other_databases_are_refused_by_name(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        Database(url)
    assert "secret" not in str(caught.value)


def test_0028_keeps_the_tokens_made_before_it_working_as_admin(store_url: str) -> None:
    db = Database(store_url)
    migrate.upgrade(db, "0027")
    before = sa.table(  # api_tokens as revision 0027 left it
        "api_tokens",
        *(sa.column(name) for name in ("id", "name", "token_hash", "prefix")),
        sa.column("created_at", UtcDateTime),
    )
    with db.write() as conn:
        conn.execute(
            before.insert().values(
                id="6f0c1d2e-0000-4000-8000-000000000001",
                name="old",
                token_hash=hash_token("ocb_old-secret"),
                prefix="ocb_old-",
                created_at=utcnow(),
            )
        )
    db.upgrade()
    token = TokenStore(db).verify("ocb_old-secret")
    assert token is not None
    assert (token.name, token.scope) == ("old", Scope.admin)
    db.close()


def test_0030_stores_discord_homes_as_channel_homes_and_back(store_url: str) -> None:
    db = Database(store_url)
    migrate.upgrade(db, "0029")
    agents = sa.table(  # the columns of agents this revision reads and writes
        "agents",
        *(sa.column(name) for name in ("id", "name", "prompt")),
        sa.column("heartbeat_json", sa.JSON),
        sa.column("created_at", UtcDateTime),
        sa.column("updated_at", UtcDateTime),
    )
    discord = {"every_secs": 600, "gateway": "discord", "guild_id": "7", "channel_id": "9"}
    session = {"every_secs": 3600, "gateway": "session", "session_id": "s-1"}
    ids = [f"6f0c1d2e-0000-4000-8000-00000000002{n}" for n in range(3)]
    homes = dict(zip(ids, [discord, session, None], strict=True))
    with db.write() as conn:
        for agent_id, home in homes.items():
            beat = {"interval_secs": 29, "enabled": True}
            conn.execute(
                agents.insert().values(
                    id=agent_id,
                    name=agent_id[-1],
                    prompt="",
                    heartbeat_json=beat if home is None else {**beat, "home": home},
                    created_at=utcnow(),
                    updated_at=utcnow(),
                )
            )

    def stored() -> dict[str, Any]:
        with db.read() as conn:
            rows = conn.execute(sa.select(agents.c.id, agents.c.heartbeat_json)).all()
        return {str(agent_id): beat.get("home") for agent_id, beat in rows}

    db.upgrade()
    assert stored() == {
        ids[0]: {"every_secs": 600, "gateway": "discord", "channel_id": "9", "conversation": "7/9"},
        ids[1]: session,
        ids[2]: None,
    }
    migrate.downgrade(db, "0029")
    assert stored() == homes
    db.close()
