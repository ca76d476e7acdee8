"""Prepared statements return what SQLAlchemy's own execution returns, types included,
on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from opencrab.store import Database, dialects
from opencrab.store import tables as t
from opencrab.store.prepared import Prepared

WHEN = datetime(2026, 2, 1, 12, 0, tzinfo=timezone(timedelta(hours=9)))

BY_NAME = Prepared(
    sa.select(t.sessions.c.id, t.sessions.c.context, t.sessions.c.created_at)
    .where(t.sessions.c.kind == "chat", t.sessions.c.agent_id == sa.bindparam("agent_id"))
    .order_by(t.sessions.c.id)
)
TOUCH = Prepared(
    t.sessions.update()
    .where(t.sessions.c.id == sa.bindparam("sid"))
    .values(updated_at=sa.bindparam("when"), turn_number=t.sessions.c.turn_number + 1)
)
ADD = Prepared(
    t.sessions.insert().values(
        id=sa.bindparam("sid"),
        agent_id=sa.bindparam("agent_id"),
        context=sa.bindparam("context", type_=sa.JSON),
        created_at=sa.bindparam("when"),
        updated_at=sa.bindparam("when"),
    )
)


@pytest.fixture
def db(any_db: Database) -> Database:
    """The store under test: SQLite, then PostgreSQL (see tests/conftest.py `store_url`)."""
    return any_db


@pytest.fixture
def agent(db: Database) -> str:
    with db.write() as conn:
        conn.execute(
            t.agents.insert().values(id="a1", name="a", prompt="", created_at=WHEN, updated_at=WHEN)
        )
    return "a1"


def test_rows_match_core_execution(db: Database, agent: str) -> None:
    with db.write() as conn:
        ADD.execute(conn, sid="s1", agent_id=agent, context={"k": ["v", 1]}, when=WHEN)
        ADD.execute(conn, sid="s2", agent_id=agent, context=None, when=WHEN)
    with db.read() as conn:
        ours = BY_NAME.rows(conn, agent_id=agent)
        theirs = conn.execute(BY_NAME.statement, {"agent_id": agent}).all()
    assert [tuple(r) for r in ours] == [tuple(r) for r in theirs]
    assert ours[0].context == {"k": ["v", 1]}  # JSON decoded
    assert ours[0].created_at == WHEN
    assert ours[0].created_at.tzinfo == UTC
    assert ours[1].context is None


def test_dml_rowcount_and_scalar(db: Database, agent: str) -> None:
    with db.write() as conn:
        ADD.execute(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
        assert TOUCH.execute(conn, sid="s1", when=WHEN + timedelta(hours=1)) == 1
        assert TOUCH.execute(conn, sid="nope", when=WHEN) == 0
    turn = Prepared(
        sa.select(t.sessions.c.turn_number).where(t.sessions.c.id == sa.bindparam("sid"))
    )
    with db.read() as conn:
        assert turn.scalar(conn, sid="s1") == 1
        assert turn.scalar(conn, sid="nope") is None
        assert turn.first(conn, sid="nope") is None


def test_missing_parameter_is_named(db: Database, agent: str) -> None:
    with db.read() as conn, pytest.raises(TypeError, match="agent_id"):
        BY_NAME.rows(conn)


def test_a_failing_statement_raises_sqlalchemy_error_and_rolls_back(
    db: Database, agent: str
) -> None:
    def twice() -> None:
        with db.write() as conn:
            ADD.execute(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
            ADD.execute(conn, sid="s1", agent_id=agent, context=None, when=WHEN)

    with pytest.raises(sa.exc.IntegrityError):
        twice()
    with db.read() as conn:
        assert BY_NAME.rows(conn, agent_id=agent) == []


def test_outside_a_transaction_it_goes_through_sqlalchemy(db: Database, agent: str) -> None:
    with db.engine.connect() as conn:
        assert BY_NAME.rows(conn, agent_id=agent) == []


def test_returning_rows_and_a_statement_built_per_dialect(db: Database, agent: str) -> None:
    """INSERT … RETURNING gives its rows like a SELECT; a statement may be built for the
    connection's dialect (an upsert: inserted once, then updated in place)."""
    add = Prepared(
        t.messages.insert()
        .values(session_id=sa.bindparam("sid"), role="user", content=sa.bindparam("text"))
        .values(timestamp=sa.bindparam("when"))
        .returning(t.messages.c.id, t.messages.c.content)
    )
    spoke = Prepared(
        lambda dialect: dialects.upsert(
            dialect,
            t.agent_sessions,
            ("agent_id", "session_id"),
            agent_id=sa.bindparam("agent_id"),
            session_id=sa.bindparam("sid"),
            last_speech_at=sa.bindparam("when"),
        )
    )
    with db.write() as conn:
        ADD.execute(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
        first = add.first(conn, sid="s1", text="hi", when=WHEN)
        second = add.scalar(conn, sid="s1", text="again", when=WHEN)
        assert spoke.execute(conn, agent_id=agent, sid="s1", when=WHEN) == 1
        conn.execute(t.agent_sessions.update().values(done_declared=True))
        assert spoke.execute(conn, agent_id=agent, sid="s1", when=WHEN + timedelta(hours=1)) == 1
    assert first is not None
    assert first.content == "hi"
    assert second == first.id + 1
    with db.read() as conn:
        rows = conn.execute(sa.select(t.agent_sessions)).all()
    assert [(r.agent_id, r.session_id, r.done_declared) for r in rows] == [(agent, "s1", True)]
    assert rows[0].last_speech_at == WHEN + timedelta(hours=1)


def test_a_queued_write_failing_at_the_commit_rolls_back_all(db: Database, agent: str) -> None:
    """`run` may leave a write queued (PostgreSQL's pipelined transaction): its failure
    surfaces by the commit at the latest, as SQLAlchemy's error, and nothing is kept."""

    def twice() -> None:
        with db.write() as conn:
            ADD.run(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
            ADD.run(conn, sid="s1", agent_id=agent, context=None, when=WHEN)

    with pytest.raises(sa.exc.IntegrityError):
        twice()
    with db.read() as conn:
        assert BY_NAME.rows(conn, agent_id=agent) == []
    with db.write() as conn:  # the pooled connection is usable again
        ADD.run(conn, sid="s2", agent_id=agent, context=None, when=WHEN)
    with db.read() as conn:
        assert [row.id for row in BY_NAME.rows(conn, agent_id=agent)] == ["s2"]


def test_rows_read_later_are_the_inserted_ones(db: Database, agent: str) -> None:
    add = Prepared(
        t.messages.insert()
        .values(session_id=sa.bindparam("sid"), role="user", content=sa.bindparam("text"))
        .values(timestamp=sa.bindparam("when"))
        .returning(t.messages.c.id)
    )
    with db.write() as conn:
        ADD.run(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
        first = add.rows_later(conn, sid="s1", text="a", when=WHEN)
        second = add.rows_later(conn, sid="s1", text="b", when=WHEN)
    ids = [first()[0].id, second()[0].id]
    with db.read() as conn:
        stored = conn.execute(sa.select(t.messages.c.id, t.messages.c.content)).all()
    assert sorted((i, c) for i, c in stored) == [(ids[0], "a"), (ids[1], "b")]


def test_a_queued_read_is_taken_by_the_matching_read(db: Database, agent: str) -> None:
    """On PostgreSQL a queued read goes ahead (its result is what the store held when it
    was queued) and the first read with the same parameters takes it; a read with other
    parameters asks again. SQLite has no round trips to save: reads run when made."""
    with db.write() as conn:
        ADD.execute(conn, sid="s1", agent_id=agent, context={"n": 1}, when=WHEN)
    with db.write() as conn:
        BY_NAME.queue(conn, agent_id=agent)
        BY_NAME.queue(conn, agent_id="nobody")
        ADD.run(conn, sid="s2", agent_id=agent, context=None, when=WHEN)
        taken = [r.id for r in BY_NAME.rows(conn, agent_id=agent)]
        again = [r.id for r in BY_NAME.rows(conn, agent_id=agent)]
    queued = db.dialect == "postgresql"
    assert taken == (["s1"] if queued else ["s1", "s2"])
    assert again == ["s1", "s2"]  # a queued result is taken once


def test_queued_reads_end_with_their_transaction(db: Database, agent: str) -> None:
    with db.read() as conn:
        BY_NAME.queue(conn, agent_id=agent)  # never read: dropped with the transaction
    with db.write() as conn:
        ADD.execute(conn, sid="s1", agent_id=agent, context=None, when=WHEN)
        assert [r.id for r in BY_NAME.rows(conn, agent_id=agent)] == ["s1"]
