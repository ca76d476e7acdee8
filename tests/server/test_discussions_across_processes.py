"""A discussion is claimed by lease (`discussion:<id>`): started through the REST API of
one `opencrab up`, it runs there, one turn at a time, while an `opencrab worker` on the
same PostgreSQL leaves it alone; after `kill -9` of the server mid-turn the worker goes
on with it to its end. Every turn is taken once: one speech per turn, the speakers
alternating, one model call per turn (and one for the turn the kill cut short)."""

from __future__ import annotations

import threading
from itertools import pairwise
from pathlib import Path

from opencrab.core.discussion import Discussion
from opencrab.store import Database
from opencrab.store.leases import LeaseStore, discussion_key
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab, wait_for

TURNS = 5


def test_a_worker_goes_on_with_a_discussion_whose_server_was_killed(
    pg_url: str, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    db = Database(pg_url)
    db.upgrade()  # once, before two processes would each try
    env = {"OPENCRAB_DATABASE__URL": pg_url, "OPENCRAB_DATABASE__LEASE_TTL_SECS": "3"}
    cut = threading.Event()  # the third turn's model call never ends on the server
    fake_llm_server.reply(
        CHAT,
        Reply(json=completion({"content": "first"})),
        Reply(json=completion({"content": "second"})),
        Reply(gate=cut, json=completion({"content": "never heard"})),
        Reply(json=completion({"content": "again"})),
    )
    server = ServedOpenCrab(data_dir / "server", llm=fake_llm_server, env=env)
    worker = ServedOpenCrab(data_dir / "worker", llm=fake_llm_server, env=env, worker=True)
    try:
        server.start()
        worker.start()
        with server.client() as client:
            ids = []
            for name in ("ann", "ben"):
                body = {"name": name, "prompt": "Be brief.", "heartbeat": {"enabled": False}}
                made = client.post("/api/agents", json=body)
                assert made.status_code == 201, made.text
                ids.append(made.json()["id"])
            started = client.post(
                "/api/discussions",
                json={"theme": "four-day weeks", "participants": ids, "maxTurns": TURNS},
            )
            assert started.status_code == 201, started.text
            assert started.json()["running"] is True  # the server claimed it at once
            session_id = started.json()["id"]
        lease = LeaseStore(db).get(discussion_key(session_id))
        assert lease is not None
        assert lease.owner.split(":")[1] == str(server.pid)

        wait_for("the third turn to reach the model", lambda: len(calls(fake_llm_server)) == 3)
        assert spoken(db, session_id) == ["first", "second"]  # the worker took no turn
        server.kill()  # mid-turn: no shutdown, its leases stay until taken over
        wait_for(
            "the worker to end the discussion",
            lambda: Discussion.load(db, session_id).status == "completed",
            secs=120,
        )
    finally:
        cut.set()
        server.stop()
        worker.stop()

    try:
        discussion = Discussion.load(db, session_id)
        assert discussion.context["ended_by"] == "max_turns"
        assert discussion.turn_number == TURNS
        assert spoken(db, session_id) == ["first", "second"] + ["again"] * (TURNS - 2)
        speakers = [m.speaker_id for m in discussion.transcript() if m.role == "assistant"]
        assert all(a != b for a, b in pairwise(speakers)), speakers
        assert len(calls(fake_llm_server)) == TURNS + 1  # + the turn cut short by the kill
        assert LeaseStore(db).get(discussion_key(session_id)) is None  # let go at the end
    finally:
        db.close()


def calls(server: FakeLlmServer) -> list[object]:
    return list(server.requests_to(CHAT))


def spoken(db: Database, session_id: str) -> list[str]:
    """The discussion's speeches (the agents' messages), in order."""
    return [
        m.content for m in Discussion.load(db, session_id).transcript() if m.role == "assistant"
    ]
