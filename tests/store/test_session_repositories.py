"""The sessions and heartbeat repositories on SQLite and PostgreSQL (`any_db`): chat
sessions and their messages, discussions and their participants, heartbeat ticks and
the facts the heartbeat's checks read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.errors import NotFoundError
from opencrab.store import Database
from opencrab.store.repositories import heartbeats
from opencrab.store.repositories import sessions as repo
from opencrab.store.repositories.sessions import Said


@pytest.fixture
def agents(any_db: Database, settings: Settings) -> list[str]:
    store = AgentStore(any_db, settings)
    return [store.create(AgentCreate(name=name)).id for name in ("aki", "ben", "cho")]


def test_chat_sessions_with_messages_titles_and_counts(any_db: Database, agents: list[str]) -> None:
    db, aki, ben = any_db, agents[0], agents[1]
    first, second = str(uuid4()), str(uuid4())
    assert repo.claim_chat_session(db, first, aki) is None  # created now
    assert repo.claim_chat_session(db, second, ben) is None
    state = repo.claim_chat_session(db, first, ben)
    assert state == repo.SessionState("chat", aki, "active")  # not taken over
    event = str(uuid4())
    with db.write() as conn:
        repo.insert_messages(
            conn,
            first,
            [
                Said("user", "100% Sure about_this?", None, "p1", "Pat"),
                Said("assistant", "yes", event, aki, "aki", interrupted=True),
            ],
        )
    rows = repo.list_sessions(db)
    assert [r.id for r in rows] == [second, first]  # both made in one instant: by id desc
    assert [r.id for r in repo.list_sessions(db, agent_id=aki)] == [first]
    found = repo.list_sessions(db, text="100% SURE")  # case-insensitive, `%` literal
    assert [(r.id, r.title, r.message_count) for r in found] == [
        (first, "100% Sure about_this?", 2)
    ]
    assert repo.list_sessions(db, text="0%_") == repo.list_sessions(db, text="t_h") == []
    got = repo.get_session(db, first)
    assert got is not None
    assert (got.kind, got.agent_id, got.status) == ("chat", aki, "active")
    assert repo.get_session(db, str(uuid4())) is None
    said = repo.session_messages(db, first)
    assert [(m.role, m.speaker_name, m.interrupted) for m in said] == [
        ("user", "Pat", False),
        ("assistant", "aki", True),
    ]
    assert repo.session_messages(db, first, after_id=said[0].id) == said[1:]
    assert repo.touch_session(db, first, status="completed")
    assert not repo.touch_session(db, str(uuid4()))
    assert [r.id for r in repo.list_sessions(db, status="completed")] == [first]


def test_context_markers_find_the_chat_they_continue(any_db: Database, agents: list[str]) -> None:
    db, aki = any_db, agents[0]
    chat = str(uuid4())
    repo.claim_chat_session(db, chat, aki)
    path = ("openai_compat", "next")
    assert repo.continued_chat(db, aki, path, "digest") is None
    assert repo.update_context(db, chat, lambda c: {**c, "openai_compat": {"next": "digest"}})
    assert repo.continued_chat(db, aki, path, "digest") == chat
    assert repo.continued_chat(db, aki, path, "other") is None
    assert not repo.update_context(db, str(uuid4()), lambda c: c)


def test_discussions_participants_and_their_acts(any_db: Database, agents: list[str]) -> None:
    db, (aki, ben, cho) = any_db, agents
    ghost = str(uuid4())
    with pytest.raises(NotFoundError, match=ghost):
        repo.create_discussion(
            db,
            str(uuid4()),
            theme="t",
            mode="autonomous",
            phase="divergent",
            participants=[aki, ghost],
            facilitator_id=None,
            max_turns=None,
        )
    assert repo.list_sessions(db) == []  # nothing stored
    session = str(uuid4())
    repo.create_discussion(
        db,
        session,
        theme="Tea or coffee",
        mode="autonomous",
        phase="divergent",
        participants=[aki, ben],
        facilitator_id=None,
        max_turns=4,
    )
    row = repo.get_discussion(db, session)
    assert row is not None
    assert (row.theme, row.turn_number, row.participant_ids_json) == (
        "Tea or coffee",
        0,
        [aki, ben],
    )
    repo.add_participant(db, session, cho)
    with pytest.raises(NotFoundError):
        repo.add_participant(db, session, ghost)
    assert repo.done_declared(db, session) == {aki: False, ben: False, cho: False}
    assert repo.declare_done(db, aki, session) == 1
    assert repo.declare_done(db, aki, session) == 1  # once
    assert repo.done_declared(db, session)[aki] is True
    spoke = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with db.write() as conn:
        repo.mark_speech(conn, ben, session, spoke)
        repo.set_phase(conn, session, "convergent")
        repo.insert_messages(conn, session, [Said("assistant", "Tea.", None, ben, "ben")])
        repo.insert_messages(conn, session, [Said("tool", "ok", None, None, None)])
    assert repo.update_context(db, session, lambda c: {**c, "seen": {ben: 1}}, next_turn=True)
    row = repo.get_discussion(db, session)
    assert row is not None
    assert (row.phase, row.turn_number, row.context) == ("convergent", 1, {"seen": {ben: 1}})
    assert [(s.role, s.content) for s in repo.latest_spoken(db, session, after=0, limit=5)] == [
        ("assistant", "Tea.")
    ]
    assert repo.active_discussions(db) == [(session, {"seen": {ben: 1}})]
    with db.read() as conn:
        members = {r["agent_id"]: r for r in repo.autonomous_discussions(conn)}
    assert set(members) == {aki, ben, cho}
    assert members[ben]["last_speech_at"] == spoke
    assert members[aki]["done_declared"]
    assert members[aki]["done_count"] == 1


def test_heartbeat_ticks_and_facts(any_db: Database, agents: list[str]) -> None:
    db, (aki, ben, _) = any_db, agents
    session = str(uuid4())
    repo.create_discussion(
        db,
        session,
        theme="t",
        mode="autonomous",
        phase="divergent",
        participants=[aki, ben],
        facilitator_id=None,
        max_turns=None,
    )
    MemoryManager(db, aki).append_session_logs(
        [
            SessionLog(session_id=session, log_type="speech", content="hi", speaker_id=aki),
            SessionLog(session_id=session, log_type="inner_voice", content="hm"),
        ]
    )
    facts = heartbeats.observe(db, since=datetime.now(UTC) - timedelta(days=1))
    assert facts.spent == {}
    assert set(facts.latest_log) == {aki}
    speech = facts.latest_log[aki] - 1  # the speech line, before the inner voice
    seen = sorted(
        (d["agent_id"], d["last_speech_log"], d["last_speaker"]) for d in facts.discussions
    )
    assert seen == sorted([(aki, speech, aki), (ben, speech, aki)])
    assert all("context" not in d for d in facts.discussions)
    repo.update_context(db, session, lambda c: {**c, "runner": True})
    assert heartbeats.observe(db, since=datetime.now(UTC)).discussions == []  # left to it
    now = datetime.now(UTC)
    heartbeats.write_ticks(
        db,
        [
            {"agent_id": aki, "decision": "learn", "result_json": {"n": 1}, "created_at": now},
            {"agent_id": aki, "decision": "speak", "result_json": {"n": 2}, "created_at": now},
            {"agent_id": aki, "decision": "speak", "result_json": None, "created_at": now},
            {"agent_id": ben, "decision": "learn", "result_json": {"n": 4}, "created_at": now},
        ],
    )
    learned, spoke = heartbeats.last_ticks(db, aki)
    assert learned is not None
    assert learned.result == {"n": 1}
    assert [t.result for t in spoke] == [{}, {"n": 2}]  # newest first
    assert heartbeats.last_ticks(db, agents[2]) == (None, [])
