"""What one turn stores is bounded: huge arguments, replies and outputs are cut with a
marker, their full size recorded (`[agent] max_event_bytes`)."""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.core.agent import Agent
from opencrab.core.memory import MemoryManager
from opencrab.core.record_cap import cut_arguments, cut_text
from opencrab.core.runtime import Runtime
from opencrab.core.workspace import Workspace
from opencrab.event_log import EventLog
from opencrab.events import MessageEvent, ToolCallEvent, ToolResultEvent
from opencrab.store.tables import events, memory_sessions, messages
from tests.core.conftest import calls
from tests.fakes.scripted_provider import ScriptedProvider

CAP = 256 * 1024  # the default [agent] max_event_bytes


def stored_bytes(runtime: Runtime, table: sa.Table, column: str) -> int:
    with runtime.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.max(sa.func.length(table.c[column])))).scalar())


async def test_huge_arguments_of_a_failed_call_are_stored_cut_with_their_size(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    huge = "x" * 5_000_000
    scripted.outcomes.clear()
    scripted.then(
        calls(("ws_write", {"path": "../escape.md", "content": huge}), text="y" * 3_000_000),
        "done",
    )
    result = await runtime.chat(agent, "write it")
    assert not result.actions[0].result.success  # the path is refused: a failed call

    trace = EventLog(runtime.db).trace(result.trace_id)
    call = next(e for e in trace if isinstance(e, ToolCallEvent))
    arguments = call.content.arguments
    assert arguments["path"] == "../escape.md"  # small values stay whole
    assert arguments["content"].endswith("…[cut: 5000000 bytes in full]")
    assert len(arguments["content"].encode()) < CAP + 100
    assert call.metadata["cut"] == {
        "arguments": len(f'{{"path":"../escape.md","content":"{huge}"}}')
    }
    reasoning = next(e for e in trace if e.type == "reasoning")
    assert reasoning.metadata == {"cut": {"text": 3_000_000}}
    assert reasoning.content.text.startswith("yyy")
    # nothing of the turn stores more than the cap and a marker
    assert stored_bytes(runtime, events, "content") < CAP + 200
    assert stored_bytes(runtime, memory_sessions, "content") < CAP + 200


async def test_a_huge_text_reply_is_cut_in_the_event_log_and_message(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    scripted.outcomes.clear()
    scripted.then("é" * 1_000_000)  # two bytes each: the cut never splits one
    result = await runtime.chat(agent, "talk")
    assert result.reply == "é" * 1_000_000  # the live reply is whole; the record is cut
    said = next(
        e for e in EventLog(runtime.db).trace(result.trace_id) if isinstance(e, MessageEvent)
    )
    assert said.metadata == {"cut": {"text": 2_000_000}}
    kept, marker = said.content.text.split("\n…")
    assert kept == "é" * (CAP // 2)
    assert marker == "[cut: 2000000 bytes in full]"
    logs = MemoryManager(runtime.db, agent.id).session_logs(result.session_id)
    assert logs[-1].content == said.content.text
    assert stored_bytes(runtime, messages, "content") < CAP + 100


async def test_a_huge_action_output_is_cut_in_its_result_event(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.settings.agent.max_event_bytes = 4096
    Workspace.for_agent(runtime.settings, agent.id).write("big.txt", "z" * 50_000)
    scripted.outcomes.clear()
    scripted.then(calls(("ws_read", {"path": "big.txt"})), "read it")
    result = await runtime.chat(agent, "read")
    trace = EventLog(runtime.db).trace(result.trace_id)
    output = next(e for e in trace if isinstance(e, ToolResultEvent))
    assert output.metadata["cut"]["output"] > 50_000
    assert len(output.content.output.encode()) < 4096 + 100
    assert output.content.output.startswith('{"path"')


def test_cut_text_keeps_whole_characters_and_leaves_short_text_alone() -> None:
    assert cut_text("short", 1024) == ("short", None)
    text, full = cut_text("日本語" * 1000, 1024)
    assert full == 9000
    assert text.startswith("日本語")
    assert text.endswith("…[cut: 9000 bytes in full]")
    assert len(text.split("\n…")[0].encode()) <= 1024


def test_arguments_that_are_not_an_object_become_their_cut_json() -> None:
    value, full = cut_arguments(list(range(100_000)), 2048)
    assert isinstance(value, str)
    assert value.startswith("[0,1,2,")
    assert full is not None
    assert full > 2048
    assert cut_arguments({"a": 1}, 2048) == ({"a": 1}, None)


async def test_an_actions_own_memory_line_is_cut_like_the_steps(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    """A line an action logs (the inner voice) goes in with its step's lines, so the
    cap holds for it too."""
    runtime.settings.agent.max_event_bytes = 1024
    thought = "思" * 3000  # 9000 bytes; within the action's 8000 characters
    scripted.outcomes.clear()
    scripted.then(calls(("generate_inner_voice", {"content": thought})), "done")
    result = await runtime.chat(agent, "think")
    assert result.actions[0].result.success
    logs = MemoryManager(runtime.db, agent.id).session_logs(result.session_id)
    inner = next(line for line in logs if line.log_type == "inner_voice")
    assert inner.content.startswith("思" * 100)
    assert inner.content.endswith("[cut: 9000 bytes in full]")
    assert len(inner.content.encode()) < 1024 + 100
