"""Hostile tool calls: arguments nested past every parser's limit and paths longer than
the OS allows become error results the model sees, recorded as events, never a crash."""

from __future__ import annotations

import errno
import json
from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tools import sync_tools, tool_id
from opencrab.core.workspace import Workspace
from opencrab.event_log import EventLog
from opencrab.events import ToolCallEvent, ToolResultEvent
from opencrab.llm.types import ToolCall
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, reply


def _nested(depth: int) -> str:
    return '{"path": "a.md", "content": "x", "extra": ' + "[" * depth + "]" * depth + "}"


def _raw_call(name: str, raw: str, arguments: Any) -> ToolCall:
    return ToolCall(id="call_deep", name=name, arguments=arguments, raw_arguments=raw)


async def test_deeply_nested_arguments_become_a_recorded_error_result(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, db: Database
) -> None:
    raws = [_nested(255), _nested(5000)]
    parsed: list[Any] = []
    for raw in raws:
        try:
            parsed.append(json.loads(raw))
        except RecursionError:
            parsed.append(raw)  # what a provider's parse_arguments leaves: the raw text
    scripted.outcomes.clear()
    scripted.then(
        reply(tool_calls=[_raw_call("ws_write", raws[0], parsed[0])]),
        reply(tool_calls=[_raw_call("ws_write", raws[1], parsed[1])]),
        speak("ok"),
    )
    result = await runtime.chat(agent, "hi")
    assert result.reply == "ok"
    errors = [a.result.error or "" for a in result.actions[:2]]
    assert all("nested" in e for e in errors), errors
    fed_back = [m for m in scripted.requests[-1].messages if m.role == "tool"]
    assert len(fed_back) == 2
    assert all(m.is_error for m in fed_back)
    events = EventLog(db).trace(result.trace_id)
    recorded = [e for e in events if isinstance(e, ToolCallEvent)][:2]
    assert [e.content.arguments for e in recorded] == raws  # kept as the model's text
    results = [e for e in events if isinstance(e, ToolResultEvent)][:2]
    assert [e.content.tool_call_id for e in results] == [e.id for e in recorded]
    assert all(e.content.is_error and "nested" in e.content.output for e in results)


async def test_a_path_over_the_os_limit_is_refused_without_showing_the_servers_path(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    component = "😀" * 63
    path = "/".join([component] * 16)  # within the 1,024-character rule, 4,047 bytes
    scripted.outcomes.clear()
    scripted.then(
        calls(
            ("ws_write", {"path": path, "content": "x"}),
            ("ws_read", {"path": path}),
            ("ws_edit", {"path": path, "old_string": "x", "new_string": "y"}),
            ("ws_mkdir", {"path": path}),
            ("ws_list", {"path": path}),
            ("ws_delete", {"path": path}),
        ),
        speak("ok"),
    )
    result = await runtime.chat(agent, "hi")
    assert result.reply == "ok"
    workspace = Workspace.for_agent(runtime.settings, agent.id)
    errors = [a.result.error or "" for a in result.actions[:6]]
    assert [a.result.success for a in result.actions[:6]] == [False] * 6
    for error in errors:
        assert "UTF-8" in error, error
        assert str(runtime.settings.data_dir) not in error
        assert str(workspace.root) not in error
    shown = "".join(str(m.content) for m in scripted.requests[-1].messages if m.role == "tool")
    assert str(runtime.settings.data_dir) not in shown


class _Disk(Action):
    """Fails as a file system call does: with the absolute path it was given."""

    name = "disk"
    description = "touches the disk"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        raise OSError(errno.EIO, "Input/output error", str(ctx.workspace.root / "a.md"))


async def test_an_os_error_in_an_action_is_shown_without_its_path(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.registry.register(_Disk())
    sync_tools(runtime.db, runtime.registry)
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("disk")]))  # granted
    scripted.outcomes.clear()
    scripted.then(calls(("disk", {})), speak("ok"))
    result = await runtime.chat(agent, "hi")
    (failed,) = [a for a in result.actions if a.name == "disk"]
    assert failed.result.error == "disk failed: Input/output error"
