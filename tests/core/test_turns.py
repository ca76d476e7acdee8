"""The turn service is the only way a turn runs; steps serialise through one function; a
turn's metrics rows are written with their token_usage events, in one transaction."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from uuid import UUID

import pytest
import sqlalchemy as sa

from opencrab.actions.base import ActionResult, SideEffect
from opencrab.cli.agents import _chat_turn
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate, HeartbeatConfig, SessionHome
from opencrab.core.discussion import Discussion
from opencrab.core.heartbeat import Tick, heartbeat_act
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session, session_messages
from opencrab.core.steps import (
    ActionDone,
    Compacted,
    EngineStep,
    LlmReplied,
    SessionMessage,
    Spoke,
    TextDelta,
    TurnFailed,
    TurnResult,
    TurnStarted,
    step_from_json,
    step_json,
)
from opencrab.core.turns import TurnInfo
from opencrab.gateway.cli import CliGateway
from opencrab.gateway.serve import GatewayRunner
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatRequest, ChatResponse, ToolCall
from opencrab.messages import CliSource, IncomingMessage, RestSource
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.tables import events, llm_usage_metrics
from tests.core.conftest import calls, speak
from tests.fakes.chat_gateway import MemoryChat
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.local import LocalClient


# ------------------------------------------------------------------ one owner
def _origin(info: TurnInfo) -> str:
    """Which caller started a turn, from the message it answers."""
    source = info.message.source
    if isinstance(source, RestSource):
        return "v1" if source.request_id.startswith("chatcmpl-") else "rest"
    return str(getattr(source, "origin", None) or source.kind)


def test_every_caller_runs_its_turns_through_the_service(settings: Settings, db: Database) -> None:
    settings.gateway.openai_compat.enabled = True
    scripted = ScriptedProvider("openai", "a plain answer")
    router = LlmRouter(settings)
    router.register_provider(scripted)
    seen: list[tuple[str, str, str]] = []  # (caller, session, step type)

    def listen(info: TurnInfo, step: EngineStep) -> None:
        seen.append((_origin(info), info.session_id, step.type))

    with LocalClient(create_app(settings, db, router=router)) as client:
        runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
        runtime.turns.listeners.append(listen)
        aki = client.post("/api/agents", json={"name": "aki", "prompt": "Be brief."}).json()
        client.post("/api/agents", json={"name": "bo", "prompt": "Be brief."})

        session = client.post("/api/sessions", json={"agentId": aki["id"]}).json()["id"]
        posted = client.post(f"/api/sessions/{session}/messages", json={"content": "hi"})
        assert posted.status_code == 201, posted.text

        with client.websocket_connect("/api/ws") as ws:
            ws.send_json({"type": "chat", "agent": "aki", "content": "hi", "requestId": "w"})
            while ws.receive_json()["type"] != "chat.done":
                pass

        v1 = client.post(
            "/v1/chat/completions",
            json={"model": "aki", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert v1.status_code == 200, v1.text

        agent = runtime.agents.get("aki")
        cli_session = ensure_chat_session(runtime.db, agent.id)
        gateway = CliGateway(session_id=cli_session, stdout=io.StringIO())
        incoming = IncomingMessage.text("hi", source=CliSource(session_id=cli_session))
        client.portal.call(_chat_turn, runtime, agent, gateway, incoming)  # type: ignore[union-attr]

        discussion = Discussion.create(
            runtime.db, theme="tea", participants=[agent.id, runtime.agents.get("bo").id]
        )
        client.portal.call(discussion.take_turn, runtime, agent)  # type: ignore[union-attr]

        home = SessionHome(gateway="session", session_id=UUID(cli_session), every_secs=600)
        agent = runtime.agents.update(agent.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))
        tick = Tick(agent.id, "speak", "home", session_id=cli_session, checks={"home": True})
        client.portal.call(heartbeat_act, runtime, tick)  # type: ignore[union-attr]

        chat = MemoryChat()
        chat.post("hi")
        runner = GatewayRunner(chat, runtime, agent)

        async def one_message() -> None:
            await runner.handle(await chat.receive())

        client.portal.call(one_message)  # type: ignore[union-attr]

    callers = ["rest", "websocket", "v1", "cli", "discussion", "heartbeat", "slack"]
    assert list(dict.fromkeys(caller for caller, _, _ in seen)) == callers
    for caller in callers:  # each turn, whole: started … done, every step seen
        types = [t for c, _, t in seen if c == caller]
        assert types[0] == "chat.started", (caller, types)
        assert types[-1] == "chat.done", (caller, types)
    assert {s for c, s, _ in seen if c == "discussion"} == {discussion.id}
    assert {s for c, s, _ in seen if c == "heartbeat"} == {cli_session}


async def test_a_turn_refused_by_its_session_runs_nothing(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    other = runtime.agents.create(AgentCreate(name="bo"))
    theirs = ensure_chat_session(runtime.db, other.id)
    seen: list[str] = []
    runtime.turns.listeners.append(lambda info, step: seen.append(step.type))
    with pytest.raises(Exception, match="belongs to another agent"):
        await runtime.turns.chat(agent, "hi", session_id=theirs)
    with pytest.raises(Exception, match="no session"):
        await runtime.turns.chat(agent, "hi", session_id=str(UUID(int=7)), create=False)
    discussion = Discussion.create(runtime.db, theme="tea", participants=[agent.id, other.id])
    with pytest.raises(Exception, match="is a discussion session"):
        await runtime.turns.chat(agent, "hi", session_id=discussion.id)
    assert seen == []
    assert scripted.requests == []


async def test_steps_carry_the_messages_they_wrote(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    scripted.outcomes.clear()
    scripted.then(speak("noted"))
    steps = [s async for s in runtime.turns.chat_steps(agent, "remember tea")]
    started = next(s for s in steps if isinstance(s, TurnStarted))
    spoke = next(s for s in steps if isinstance(s, Spoke))
    stored = {m.id: m for m in session_messages(runtime.db, started.session_id)}
    assert started.user_message is not None
    assert spoke.message is not None
    for written in (started.user_message, spoke.message):
        row = stored[written.id]
        assert (row.role, row.content, row.event_id, row.speaker_id) == (
            written.role,
            written.content,
            written.event_id,
            written.speaker_id,
        )
        assert row.timestamp == written.timestamp
    assert (started.user_message.content, spoke.message.content) == ("remember tea", "noted")
    assert spoke.message.event_id == spoke.event_id


# ------------------------------------------------------------------ one serialiser
STEPS: list[EngineStep] = [
    Compacted(3, "they talked of tea", 9000, 1200, "e0"),
    TurnStarted(
        "s1",
        "t1",
        "e1",
        SessionMessage(7, "user", "hi", datetime(2026, 1, 2, tzinfo=UTC), "e1", "u", "Mina"),
    ),
    TurnStarted("s1", "t1", "e1", None),
    TextDelta("he"),
    LlmReplied(
        "openai",
        "gpt-5-mini",
        "thinking",
        [ToolCall(id="c1", name="ws_write", arguments={"path": "a.md"})],
        10,
        4,
        0.001,
        120,
        "m1",
        "tool_calls",
    ),
    ActionDone(
        "ws_write",
        {"path": "a.md"},
        ActionResult.ok({"path": "a.md", "bytes": 1}, SideEffect(type="file_written", path="a.md")),
        "e2",
        "e3",
    ),
    ActionDone("teleport", {}, ActionResult.fail("unknown action 'teleport'"), "e4", "e5"),
    Spoke("hello", "send_speech", "e6", None),
    TurnFailed("budget_exceeded", "over budget", "e7"),
]
STEPS.append(
    TurnResult(
        "s1",
        "t1",
        "hello",
        [STEPS[5], STEPS[6]],
        2,
        STEPS[-1],
        "send_speech",  # type: ignore[list-item,arg-type]
    )
)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.type)
def test_every_step_survives_its_serialiser(step: EngineStep) -> None:
    data = step_json(step)
    assert data["type"] == step.type
    assert step_from_json(json.loads(json.dumps(data))) == step


def test_the_serialisers_form_is_the_websockets_wire_form() -> None:
    """What the dashboard and WebSocket clients read stays where it was."""
    started, done = step_json(STEPS[1]), step_json(STEPS[-1])
    assert (started["type"], started["sessionId"], started["traceId"]) == (
        "chat.started",
        "s1",
        "t1",
    )
    assert step_json(TextDelta("he")) == {"type": "token", "text": "he"}
    action = step_json(STEPS[5])
    assert {k: action[k] for k in ("type", "name", "arguments", "success", "output")} == {
        "type": "action",
        "name": "ws_write",
        "arguments": {"path": "a.md"},
        "success": True,
        "output": '{"path": "a.md", "bytes": 1}',
    }
    assert {k: step_json(STEPS[7])[k] for k in ("type", "text", "via")} == {
        "type": "reply",
        "text": "hello",
        "via": "send_speech",
    }
    assert {k: done[k] for k in ("type", "reply", "stoppedBy", "iterations", "error")} == {
        "type": "chat.done",
        "reply": "hello",
        "stoppedBy": "send_speech",
        "iterations": 2,
        "error": "over budget",
    }
    with pytest.raises(ValueError, match="unknown step type"):
        step_from_json({"type": "nonsense"})


# ------------------------------------------------------------------ one transaction
def _counts(db: Database) -> tuple[int, int]:
    with db.read() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(llm_usage_metrics)).scalar()
        usage = conn.execute(
            sa.select(sa.func.count()).select_from(events).where(events.c.type == "token_usage")
        ).scalar()
    return int(rows or 0), int(usage or 0)


async def test_a_calls_metrics_row_is_written_with_its_token_usage_event(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    scripted.outcomes.clear()
    scripted.then(calls(("ws_write", {"path": "a.md", "content": "x"})), speak("done"))
    result = await runtime.turns.chat(agent, "write it")
    assert result.reply == "done"
    assert _counts(runtime.db) == (2, 2)
    with runtime.db.read() as conn:
        usage = conn.execute(
            sa.select(events.c.metadata).where(events.c.type == "token_usage")
        ).all()
        ids = {r[0] for r in conn.execute(sa.select(llm_usage_metrics.c.id)).all()}
    named = {json.loads(meta)["metrics_id"] for (meta,) in usage}
    assert named == ids


async def test_a_failure_between_the_event_and_its_metrics_row_leaves_neither(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    """The database refuses the metrics row (a trigger): the step's transaction, with its
    token_usage event, is rolled back; no metrics row is left without its event."""
    with runtime.db.write() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse_metrics BEFORE INSERT ON llm_usage_metrics "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    scripted.outcomes.clear()
    scripted.then(calls(("ws_write", {"path": "a.md", "content": "x"})))
    with pytest.raises(Exception, match="disk full"):
        await runtime.turns.chat(agent, "write it")
    await runtime.router.metrics.flush()  # type: ignore[union-attr]
    assert _counts(runtime.db) == (0, 0)
    with runtime.db.read() as conn:
        types = [r[0] for r in conn.execute(sa.select(events.c.type)).all()]
    assert "tool_call" not in types  # the reply's step went with it: nothing half-written
    assert "user" in types  # the step before it stands


class BlankSummaries(ScriptedProvider):
    """A small window, whose summary calls (no tools) come back blank."""

    def context_window(self, model: str) -> int:
        return 9000

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        if request.tools is None:
            self.requests.append(request)
            return reply("   ")
        return await super().chat_completion(request)


async def test_a_call_no_event_names_is_still_counted(runtime: Runtime, agent: Agent) -> None:
    """A summary the turn did not use (blank: an extract is kept instead) has no
    token_usage event, and its metrics row is still written."""
    small = BlankSummaries("openai", speak("ok"))
    runtime.router.register_provider(small)
    session = None
    compacted = False
    for n in range(12):
        async for step in runtime.turns.chat_steps(
            agent, f"message {n}: " + "words " * 300, session_id=session
        ):
            compacted = compacted or isinstance(step, Compacted)
            if isinstance(step, TurnResult):
                session = step.session_id
    assert compacted
    summaries = [r for r in small.requests if r.tools is None]
    assert summaries
    await runtime.router.metrics.flush()  # type: ignore[union-attr]
    rows, usage = _counts(runtime.db)
    assert rows == len(small.requests)  # every call counted, the blank summaries too
    assert usage == len(small.requests) - len(summaries)


async def test_a_turn_records_the_same_on_both_databases(
    settings: Settings, any_db: Database
) -> None:
    """Messages come back with their ids and metrics rows go in with their events, on
    SQLite and on PostgreSQL alike."""
    scripted = ScriptedProvider("openai", speak("noted"))
    metrics = MetricsRecorder(any_db)
    router = LlmRouter(settings, metrics=metrics)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=any_db, router=router) as rt:
        agent = rt.agents.create(AgentCreate(name="aki"))
        steps = [s async for s in rt.turns.chat_steps(agent, "remember tea")]
    await metrics.aclose()
    started = next(s for s in steps if isinstance(s, TurnStarted))
    spoke = next(s for s in steps if isinstance(s, Spoke))
    assert started.user_message is not None
    assert spoke.message is not None
    stored = session_messages(any_db, started.session_id)
    assert [(m.id, m.content) for m in stored] == [
        (started.user_message.id, "remember tea"),
        (spoke.message.id, "noted"),
    ]
    assert _counts(any_db) == (1, 1)
