"""The turn that continues a chat after a person decided its held call is durable and is
delivered wherever the person waits (core/approval_followups.py), with real `opencrab up`
and `opencrab worker` processes on one database and the fake OpenAI server answering:

- the process that took the decision is killed (SIGKILL) while the follow-up turn waits
  for the model; another process runs the follow-up, and the session gets one reply;
- a WebSocket on one server is answered after a decision taken through another.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from opencrab.actions.base import default_registry
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.core.sessions import session_messages
from opencrab.core.tools import sync_tools, tool_id
from opencrab.store import Database
from opencrab.store.repositories import approvals as repo
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, call, chunk, completion, tool_delta, tool_reply
from tests.fakes.served import ServedOpenCrab, wait_for

WRITE = {"path": "out.txt", "content": "made"}


@pytest.fixture
def db(store_url: str) -> Iterator[Database]:
    database = Database(store_url)
    database.upgrade()
    sync_tools(database, default_registry())
    yield database
    database.close()


def _env(store_url: str, settings: Settings) -> dict[str, str]:
    """The processes' settings: this store and short leases (a crash noticed in seconds)."""
    found = {"OPENCRAB_DATABASE__LEASE_TTL_SECS": "3"}
    if store_url != settings.database_url:
        found["OPENCRAB_DATABASE__URL"] = store_url
    return found


def _agent(db: Database, settings: Settings) -> str:
    """An agent whose every write_file call waits for a person."""
    created = AgentStore(db, settings).create(
        AgentCreate(
            name="aki",
            prompt="You keep files.",
            heartbeat=HeartbeatConfig(enabled=False),
            tool_ids=[tool_id("write_file")],
        )
    )
    save_tool_settings(db, created.id, ToolSettings(approvals={"write_file": "always"}))
    return created.id


def _text(content: str) -> Reply:
    return Reply(json=completion({"content": content}))


def _said(db: Database, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in session_messages(db, session_id)]


def test_a_follow_up_cut_off_by_a_kill_runs_once_in_another_process(
    db: Database, settings: Settings, store_url: str, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    llm, gate = fake_llm_server, threading.Event()
    llm.reply(
        CHAT,
        tool_reply(call("call_w", "write_file", WRITE)),
        Reply(gate=gate, json=completion({"content": "never read"})),
        _text("The file is written."),
    )
    agent_id = _agent(db, settings)
    env = _env(store_url, settings)
    first = ServedOpenCrab(data_dir, llm=llm, env=env).start()
    try:
        with first.client() as http:
            session = http.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
            posted = http.post(f"/api/sessions/{session}/messages", json={"content": "write it"})
            assert posted.status_code == 201, posted.text
            turn = posted.json()["turn"]
            assert turn["stoppedBy"] == "approval"
            approved = http.post(f"/api/approvals/{turn['approvalId']}/approve")
            assert approved.status_code == 200, approved.text
        wait_for("the follow-up to reach the model", lambda: len(llm.requests_to(CHAT)) == 2)
        first.kill()  # mid-turn: its follow-up stays pending, its leases are a dead one's
        with ServedOpenCrab(data_dir, llm=llm, env=env, worker=True):
            wait_for(
                "another process to run the follow-up",
                lambda: _said(db, session)[-1:] == [("assistant", "The file is written.")],
            )
            with db.read() as conn:
                record = repo.get(conn, turn["approvalId"])
            assert record is not None
            wait_for("the follow-up to be marked done", lambda: _status(db, record.id) == "done")
    finally:
        gate.set()  # the dead process's request ends; nobody reads its answer
        first.stop()
    assert _said(db, session) == [("user", "write it"), ("assistant", "The file is written.")]
    assert len(llm.requests_to(CHAT)) == 3  # the follow-up ran to its end once
    history = json.dumps(llm.requests_to(CHAT)[2].json["messages"])
    assert "A person approved your call to write_file" in history
    assert [p.read_text() for p in data_dir.glob("agents/*/workspace/out.txt")] == ["made"]


def _status(db: Database, approval_id: str) -> str | None:
    with db.read() as conn:
        record = repo.get(conn, approval_id)
    return None if record is None else record.follow_up


def _receive_until(ws: ClientConnection, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        message = json.loads(ws.recv(120))
        if message["type"] in ("token", "pong"):
            continue
        seen.append(message)
        if message["type"] == kind:
            return seen


def test_a_websocket_on_one_server_hears_the_follow_up_of_a_decision_taken_on_another(
    settings: Settings, pg_url: str, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    llm = fake_llm_server
    streamed = [  # the WebSocket's turn streams; the follow-up does not
        chunk(tool_delta(0, json.dumps(WRITE), call_id="call_w", name="write_file")),
        chunk(finish="tool_calls"),
        "[DONE]",
    ]
    llm.reply(CHAT, Reply(sse=streamed), _text("Written, as asked."))
    env = _env(pg_url, settings)
    pg = Database(pg_url)
    try:
        pg.upgrade()
        sync_tools(pg, default_registry())
        _agent(pg, settings)
    finally:
        pg.close()
    deciding = ServedOpenCrab(data_dir, llm=llm, env=env).start()
    try:
        with ServedOpenCrab(data_dir, llm=llm, env=env) as asked:
            url = f"ws://127.0.0.1:{asked.port}/api/ws"
            with connect(url, open_timeout=60, additional_headers=asked.headers) as ws:
                chat = {"type": "chat", "agent": "aki", "content": "write it", "requestId": "r1"}
                ws.send(json.dumps(chat))
                first = _receive_until(ws, "chat.done")
                [waiting] = [m for m in first if m["type"] == "approval.waiting"]
                approval = waiting["approvalId"]
                decided = httpx.post(
                    f"{deciding.url}/api/approvals/{approval}/approve",
                    headers=deciding.headers,
                    timeout=60,
                )
                assert decided.status_code == 200, decided.text
                follow = _receive_until(ws, "chat.done")
    finally:
        deciding.stop()
    assert {(m["requestId"], m.get("followUp")) for m in follow} == {("r1", True)}
    assert [m["text"] for m in follow if m["type"] == "reply"] == ["Written, as asked."]
    assert follow[-1]["reply"] == "Written, as asked."
    assert follow[-1]["sessionId"] == waiting["sessionId"]
