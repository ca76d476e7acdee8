"""One hostile reply must not stall the server (issue 17 §3).

A reply may ask for any number of tool calls: only `[agent] max_tool_calls_per_reply`
of them run, the rest get an error result the model sees, and every one is recorded.
While a long reply is processed, its file and database work runs off the event loop,
so other coroutines (the health route, other sessions) keep running between its steps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading

import pytest
import sqlalchemy as sa

from opencrab.config import load_settings
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.steps import ActionDone, LlmReplied, TurnResult
from opencrab.core.workspace import Workspace
from opencrab.errors import ConfigError
from opencrab.event_log import EventLog
from opencrab.events import ToolCallEvent, ToolResultEvent
from opencrab.llm.types import ChatResponse
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider


def writes(count: int) -> ChatResponse:
    """One reply asking for `count` ws_write calls, f/0.txt … f/{count-1}.txt."""
    return calls(
        *(("ws_write", {"path": f"f/{i}.txt", "content": f"file {i}"}) for i in range(count))
    )


def test_default_cap_is_32() -> None:
    assert load_settings().agent.max_tool_calls_per_reply == 32


def test_cap_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"max_tool_calls_per_reply.*greater than or equal to 1"):
        load_settings(overrides={"agent": {"max_tool_calls_per_reply": 0}})


async def test_a_reply_of_40_calls_runs_32_and_refuses_8(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    forty = writes(40)
    scripted.outcomes.clear()
    scripted.then(forty, speak("done"))
    result = await runtime.chat(agent, "write forty files")

    assert [done.name for done in result.actions] == ["ws_write"] * 40 + ["send_speech"]
    ran, refused = result.actions[:32], result.actions[32:40]
    assert all(done.result.success for done in ran)
    assert not any(done.result.success for done in refused)
    for done in refused:
        assert "max_tool_calls_per_reply" in (done.result.error or "")
        assert "32" in (done.result.error or "")
    workspace = Workspace.for_agent(runtime.settings, agent.id)
    assert sorted(e.name for e in workspace.list("f")) == sorted(f"{i}.txt" for i in range(32))
    assert result.reply == "done"

    # the model sees every refusal as the result of its call
    follow_up = scripted.requests[1].messages
    results = [m for m in follow_up if m.role == "tool"]
    assert len(results) == 40
    for message in results[32:]:
        assert "max_tool_calls_per_reply" in str(message.content)
    assert [m.tool_call_id for m in results] == [call.id for call in forty.tool_calls]

    # every call and every result is an event, chained; refused results are errors
    events = EventLog(runtime.db).trace(result.trace_id)
    tool_calls = [e for e in events if isinstance(e, ToolCallEvent)]
    tool_results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(tool_calls) == len(tool_results) == 41  # with the send_speech
    by_call = {str(r.content.tool_call_id): r for r in tool_results}
    assert set(by_call) == {str(c.id) for c in tool_calls}
    errors = [by_call[str(c.id)].content.is_error for c in tool_calls]
    assert errors == [False] * 32 + [True] * 8 + [False]
    assert [str(r.id) for r in tool_results] == [d.result_event_id for d in result.actions]
    ids = {e.id for e in events}
    assert all(e.parent_id is None or e.parent_id in ids for e in events)
    chain = [e for e in events if e.type != "token_usage"]  # usage sidecars hang off calls
    assert len({e.parent_id for e in chain}) == len(chain)  # one chain, no fork


async def test_the_cap_is_configurable(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.settings.agent.max_tool_calls_per_reply = 3
    scripted.outcomes.clear()
    scripted.then(writes(5), speak("done"))
    result = await runtime.chat(agent, "write five files")
    assert [done.result.success for done in result.actions] == [True] * 3 + [False] * 2 + [True]
    assert "at most 3 " in (result.actions[4].result.error or "")


async def test_the_event_loop_runs_while_a_1000_call_reply_is_processed(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    """Between every two steps of the reply other coroutines get to run (no timing)."""
    scripted.outcomes.clear()
    scripted.then(writes(1000), speak("done"))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    seen: list[tuple[str, int]] = []
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        async for step in runtime.turns.chat_steps(agent, "write a thousand files"):
            if isinstance(step, LlmReplied) and step.tool_calls:
                seen.append(("replied", ticks))
            elif isinstance(step, ActionDone):
                seen.append(("ran" if step.result.success else "refused", ticks))
            elif isinstance(step, TurnResult):
                result = step
    finally:
        task.cancel()
    # the reply's 1,000 tool_call events, each action's file and database work, and the
    # refusals were each written while the ticker kept running
    points = [at for _, at in seen[:34]]
    assert all(later > earlier for earlier, later in itertools.pairwise(points))
    kinds = [kind for kind, _ in seen]
    assert kinds == ["replied"] + ["ran"] * 32 + ["refused"] * 968 + ["replied", "ran"]
    assert result.reply == "done"
    assert "max_tool_calls_per_reply" in json.loads(result.actions[999].result.output())["error"]


async def test_a_step_of_many_records_is_written_in_a_worker_thread(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    """A small step may be written on the event loop (SQLite, the lock free); one of more
    than HERE_MAX_ROWS events (a reply of a hundred calls) goes to a worker thread, where
    SQLite gives the interpreter up while it writes, so the loop answers others."""
    from opencrab.core.recorder import HERE_MAX_ROWS

    scripted.outcomes.clear()
    scripted.then(writes(100), speak("done"))
    sizes: dict[int, list[int]] = {}  # thread -> rows of each events insert it ran

    def note(_c: object, _cur: object, statement: str, params: object, *_: object) -> None:
        if statement.startswith("INSERT INTO events") and isinstance(params, list):
            sizes.setdefault(threading.get_ident(), []).append(len(params))

    sa.event.listen(runtime.db.engine, "before_cursor_execute", note)
    try:
        result = await runtime.chat(agent, "write a hundred files")
    finally:
        sa.event.remove(runtime.db.engine, "before_cursor_execute", note)
    assert result.reply == "done"
    here = threading.get_ident()
    assert max(sizes.get(here, [0])) <= HERE_MAX_ROWS
    assert any(n > HERE_MAX_ROWS for t, rows in sizes.items() if t != here for n in rows)
    if runtime.db.dialect == "sqlite":
        assert sizes.get(here)  # the small steps were written here
