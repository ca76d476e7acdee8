"""TurnRecorder owns a turn's event chain: each record is one call, chained after the last."""

from __future__ import annotations

import itertools

from opencrab.actions.base import ActionResult, TurnState
from opencrab.core.agent import Agent
from opencrab.core.memory import MemoryManager
from opencrab.core.recorder import TurnRecorder
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.events import MessageEvent, TokenUsageEvent, ToolResultEvent, UserEvent
from opencrab.messages import CliSource, IncomingMessage
from tests.core.conftest import calls
from tests.fakes.scripted_provider import reply


def recorder_for(runtime: Runtime, agent: Agent, session: str) -> TurnRecorder:
    state = TurnState(trace_id=session)
    return TurnRecorder(
        runtime.db,
        runtime.engine.events,
        MemoryManager(runtime.db, agent.id),
        runtime.settings.agent.max_event_bytes,
        session,
        session,
        agent,
        state,
    )


async def test_each_record_chains_after_the_last_across_turns(
    runtime: Runtime, agent: Agent
) -> None:
    session = ensure_chat_session(runtime.db, agent.id)
    first = recorder_for(runtime, agent, session)
    assert first.continue_chain() is None  # a new trace
    await first.user(IncomingMessage.text("hi", source=CliSource(session_id=session)))
    asked = calls(("ws_read", {"path": "a.txt"}), ("ws_read", {"path": "b.txt"}), text="hmm")
    events = await first.reply(asked, hold=False)
    (call_a, call_b) = asked.tool_calls
    done, spoke = await first.result(call_a, events[0], ActionResult.ok({"text": "A"}))
    assert spoke is None
    refused = await first.refused(
        [(call_b, events[1])], "not run", first.log("system", "refused", None)
    )
    assert await first.reply(reply("done"), hold=False) == []  # nothing written yet
    said = await first.speech("done", via="message")

    assert str(first.last) == said.event_id

    second = recorder_for(runtime, agent, session)  # the next turn: after the newest event
    start = second.continue_chain()
    await second.user(IncomingMessage.text("again", source=CliSource(session_id=session)))

    trace = runtime.engine.events.trace(session)
    chain = [e for e in trace if not isinstance(e, TokenUsageEvent)]
    assert [e.type for e in chain] == [
        "user",
        "reasoning",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "message",
        "user",
    ]
    assert chain[0].parent_id is None
    turn = chain[:-1]
    assert all(e.parent_id == before.id for before, e in itertools.pairwise(turn))
    results = [e for e in chain if isinstance(e, ToolResultEvent)]
    assert [r.content.tool_call_id for r in results] == events
    assert [r.id for r in results] == [done, *refused]
    assert [r.content.is_error for r in results] == [False, True]
    usage = [e for e in trace if isinstance(e, TokenUsageEvent)]
    assert [u.parent_id for u in usage] == [events[0], chain[6].id]  # the call, the message
    assert isinstance(chain[6], MessageEvent)
    assert str(chain[6].id) == said.event_id
    assert isinstance(chain[7], UserEvent)
    assert str(chain[7].id) == second.turn_id
    assert start is not None
    assert chain[7].parent_id == start


async def test_an_interrupted_turn_answers_its_open_calls_after_the_last_event(
    runtime: Runtime, agent: Agent
) -> None:
    session = ensure_chat_session(runtime.db, agent.id)
    recorder = recorder_for(runtime, agent, session)
    recorder.continue_chain()
    await recorder.user(IncomingMessage.text("hi", source=CliSource(session_id=session)))
    asked = calls(("ws_read", {"path": "a.txt"}), ("ws_read", {"path": "b.txt"}))
    events = await recorder.reply(asked, hold=False)
    answered, _ = await recorder.result(asked.tool_calls[0], events[0], ActionResult.ok({}))
    assert recorder.interrupted("so far") is True

    chain = [e for e in runtime.engine.events.trace(session) if e.type != "token_usage"]
    assert [e.type for e in chain][-3:] == ["tool_result", "tool_result", "message"]
    late = chain[-2]
    assert isinstance(late, ToolResultEvent)
    assert (late.parent_id, late.content.tool_call_id) == (answered, events[1])
    assert late.content.output == "interrupted by the user"
    assert chain[-1].parent_id == late.id
    assert chain[-1].metadata == {"interrupted": True}
    assert recorder.last == chain[-1].id
