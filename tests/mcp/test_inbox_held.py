"""A call of an MCP server's tool held for a person is an inbox item like any held call
(issue 37, section 2: "held tool calls (tickets, chats, MCP tools)"): the demo server
over stdio, its destructive tool held by `unsafe`, listed in the inbox with the tool
and the approval to decide, decided through that approval, then gone."""

from __future__ import annotations

from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tools import tool_id
from opencrab.mcp.client import McpServerSource
from opencrab.reports.inbox import inbox_view
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import script


async def test_a_held_mcp_tool_call_waits_in_the_inbox_and_is_decided_from_it(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("mcp__demo__wipe")]))
    save_tool_settings(runtime.db, agent.id, ToolSettings(approvals={"mcp__demo__wipe": "unsafe"}))
    script(scripted, calls(("mcp__demo__wipe", {})))
    held = await runtime.turns.chat(agent, "wipe it")
    assert held.stopped_by == "approval"
    assert held.approval_id is not None

    view = await inbox_view(runtime, agent=agent.name, kinds=["approval"], limit=50)
    (item,) = view.items
    assert (item.id, item.subject_id) == (f"approval:{held.approval_id}", held.approval_id)
    assert (item.agent_id, item.agent) == (agent.id, agent.name)
    assert item.tool_name == "mcp__demo__wipe"
    assert item.summary.startswith("Wants to run mcp__demo__wipe")
    assert (item.session_id, item.link) == (held.session_id, f"/sessions/{held.session_id}")

    script(scripted, speak("left as it is"))
    await runtime.approvals.decide(item.subject_id, approve=False, by="ops")
    after = await inbox_view(runtime, agent=None, kinds=["approval"], limit=50)
    assert after.items == []
