"""The MCP tools on a real runtime (opencrab.mcp.server.call_tool, what both transports
call): skills, a suspended ticket answered and resumed, transcripts, resources, and the
scope a token needs; the transports have their own tests (tests/server/test_mcp_http.py,
tests/cli/test_mcp_stdio.py)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from opencrab.auth import Scope
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.mcp.server import call_tool, list_resources, read_resource
from opencrab.mcp.tools import Caller
from opencrab.tickets import service

LOCAL = Caller("local")


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def ok(runtime: Runtime, name: str, args: dict[str, Any], caller: Caller = LOCAL) -> Any:
    result = await call_tool(runtime, name, args, caller)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def refused(runtime: Runtime, name: str, args: dict[str, Any], caller: Caller = LOCAL) -> str:
    result = await call_tool(runtime, name, args, caller)
    assert result.is_error
    assert "Traceback" not in text_of(result)
    return text_of(result)


async def test_skills_are_listed_and_read(runtime: Runtime, agent: Agent) -> None:
    listed = await ok(runtime, "list_skills", {"agent": "aki"})
    assert listed, "a new agent has the standard skills"
    first = listed[0]
    skill = await ok(runtime, "read_skill", {"agent": "aki", "skill": first["name"]})
    assert skill["id"] == first["id"]
    assert first["name"] in skill["markdown"]
    uri = f"opencrab://agents/aki/skills/{first['name']}"
    assert read_resource(runtime, uri).text == skill["markdown"]
    assert "no skill" in await refused(runtime, "read_skill", {"agent": "aki", "skill": "nope"})


async def test_a_suspended_ticket_resumes_with_an_answer(runtime: Runtime, agent: Agent) -> None:
    made = await ok(runtime, "create_ticket", {"agent": "aki", "context": {"goal": "sort"}})
    early = {"ticket_id": made["id"], "message": "use the red box"}
    assert "no session yet" in await refused(runtime, "answer_ticket", early)
    service.start_ticket(runtime.db, made["id"])
    service.suspend_ticket(runtime.db, made["id"], "which box?")
    answered = await ok(runtime, "answer_ticket", early)
    assert answered["status"] == "running"
    assert (await ok(runtime, "get_ticket", {"ticket_id": made["id"]}))["status"] == "running"
    hits = await ok(runtime, "search_memory", {"agent": "aki", "query": "red box"})
    assert any("use the red box" in hit["content"] for hit in hits)
    session = f"opencrab://sessions/{answered['currentSessionId']}"
    messages = json.loads(read_resource(runtime, session).text)["messages"]
    assert [m["content"] for m in messages] == ["use the red box"]
    assert "ticket_id" in await refused(runtime, "get_ticket", {"ticket_id": "not-a-uuid"})


async def test_transcripts_search_and_its_limits(runtime: Runtime) -> None:
    assert await ok(runtime, "search_transcripts", {"query": "harbour"}) == []
    assert "query" in await refused(runtime, "search_transcripts", {"query": ""})
    too_many = {"query": "x", "limit": 201}
    assert "maximum of 200" in await refused(runtime, "search_transcripts", too_many)


async def test_a_token_scope_must_cover_the_tool(runtime: Runtime, agent: Agent) -> None:
    memory = {"agent": "aki", "category": "core", "content": "likes tea"}
    chat_token = Caller("ci", Scope.chat)
    problem = await refused(runtime, "add_memory", memory, chat_token)
    assert "'chat'" in problem
    assert "'operate'" in problem
    assert await ok(runtime, "add_memory", memory, Caller("ops", Scope.operate))
    assert await ok(runtime, "list_agents", {}, Caller("reader", Scope.read))
    assert runtime.agents.summaries()  # nothing else changed


async def test_resources_name_every_persona(runtime: Runtime, agent: Agent) -> None:
    assert [str(r.uri) for r in list_resources(runtime)] == ["opencrab://agents/aki/persona"]
    persona = json.loads(read_resource(runtime, "opencrab://agents/aki/persona").text)
    assert persona["soul"] == agent.soul.model_dump(mode="json", by_alias=True)
    with pytest.raises(MCPError, match="no agent"):
        read_resource(runtime, "opencrab://agents/nobody/persona")
    with pytest.raises(MCPError, match="no resource"):
        read_resource(runtime, "file:///etc/passwd")
    with pytest.raises(MCPError, match="no session"):
        read_resource(runtime, "opencrab://sessions/not-a-session")


async def test_the_inbox_lists_a_question_to_answer_with_answer_ticket(
    runtime: Runtime, agent: Agent
) -> None:
    from tests.fakes.inbox_items import ask

    ticket_id, session_id = ask(runtime.db, agent.id, "Which box?")
    view = await ok(runtime, "inbox", {"agent": "aki", "kind": "ticket_question"})
    [item] = view["items"]
    assert (item["kind"], item["agent"], item["summary"]) == (
        "ticket_question",
        "aki",
        "Which box?",
    )
    assert (item["ticketId"], item["subjectId"]) == (ticket_id, session_id)
    await ok(runtime, "answer_ticket", {"ticket_id": ticket_id, "message": "the red one"})
    assert (await ok(runtime, "inbox", {}))["items"] == []
    assert "kind" in await refused(runtime, "inbox", {"kind": "memo"})
    assert "ghost" in await refused(runtime, "inbox", {"agent": "ghost"})
