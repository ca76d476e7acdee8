"""OpenCrab as an MCP server over streamable HTTP: the official SDK's client against a real
`opencrab up` (tokens required, as root) whose agents think through the fake OpenAI server.

One server for the module: the client lists the tools with their schemas and
annotations, chats (a reply and its cost), holds a call for approval, lists and approves
it, searches memory, adds a memory, creates a ticket and reads it back, reads spend;
a bad argument, an unknown agent and a token whose scope is too narrow get error
results; `/mcp` without a token is 401 and from another site's page 403.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from opencrab.core.tools import tool_id
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, call, completion, tool_reply
from tests.fakes.served import ServedOpenCrab

USAGE = {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    data = tmp_path_factory.mktemp("mcp") / "data"
    with ServedOpenCrab(data, llm=_llm_server_session) as server:
        agent = {"name": "aki", "prompt": "You are terse.", "toolIds": [tool_id("write_file")]}
        made = httpx.post(server.url + "/api/agents", json=agent, headers=server.headers)
        assert made.status_code == 201, made.text
        policy = {"approvals": {"write_file": "always"}}
        put = httpx.put(
            f"{server.url}/api/agents/aki/tool-settings", json=policy, headers=server.headers
        )
        assert put.status_code == 200, put.text
        yield server


@pytest.fixture
def llm(served: ServedOpenCrab, _llm_server_session: FakeLlmServer) -> FakeLlmServer:
    _llm_server_session.reset()
    return _llm_server_session


async def _session_calls(
    url: str, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[types.Tool], list[types.CallToolResult]]:
    """Open an MCP session with `token`, list the tools and make `calls` in order."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as client,
        streamable_http_client(url + "/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        results = [await session.call_tool(name, args) for name, args in calls]
    return tools, results


def run_calls(
    served: ServedOpenCrab, *calls: tuple[str, dict[str, Any]], token: str | None = None
) -> tuple[list[types.Tool], list[types.CallToolResult]]:
    return asyncio.run(_session_calls(served.url, token or served.token, list(calls)))


def value(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return json.loads(text.text)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result.content
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert "Traceback" not in text.text
    return text.text


def test_the_tools_are_listed_with_schemas_and_annotations(served: ServedOpenCrab) -> None:
    tools, _ = run_calls(served)
    by_name = {t.name: t for t in tools}
    assert {"list_agents", "chat", "search_memory", "add_memory", "create_ticket"} <= set(by_name)
    assert {"get_ticket", "answer_ticket", "list_approvals", "decide_approval"} <= set(by_name)
    assert {"list_skills", "read_skill", "search_transcripts", "get_spend"} <= set(by_name)
    search = by_name["search_memory"]
    assert search.input_schema["required"] == ["agent", "query"]
    assert search.input_schema["properties"]["limit"]["maximum"] == 100
    assert search.input_schema["additionalProperties"] is False
    assert search.annotations is not None
    assert search.annotations.read_only_hint is True
    decide = by_name["decide_approval"].annotations
    assert decide is not None
    assert (decide.read_only_hint, decide.destructive_hint) == (False, True)
    chat = by_name["chat"].annotations
    assert chat is not None
    assert chat.read_only_hint is False
    assert chat.destructive_hint is False


def test_chat_approval_memory_tickets_and_spend(served: ServedOpenCrab, llm: FakeLlmServer) -> None:
    llm.reply(CHAT, Reply(json=completion({"content": "Hello from aki"}, usage=USAGE)))
    _, (listed, chatted) = run_calls(
        served, ("list_agents", {}), ("chat", {"agent": "aki", "message": "greet the harbour"})
    )
    assert [a["name"] for a in value(listed)] == ["aki"]
    turn = value(chatted)
    assert turn["reply"] == "Hello from aki"
    assert turn["cost"]["modelCalls"] == 1
    assert (turn["cost"]["inputTokens"], turn["cost"]["outputTokens"]) == (40, 7)

    # a call held for a person: listed, then approved through MCP
    write = call("call_1", "write_file", {"path": "out.txt", "content": "made"})
    llm.reset()  # the last reply stays queued: drop it
    llm.reply(CHAT, tool_reply(write), Reply(json=completion({"content": "written"})))
    _, (held,) = run_calls(served, ("chat", {"agent": "aki", "message": "write it down"}))
    held_turn = value(held)
    assert held_turn["stoppedBy"] == "approval"
    assert held_turn["approvalId"]
    _, (pending, decided, again) = run_calls(
        served,
        ("list_approvals", {}),
        ("decide_approval", {"approval_id": held_turn["approvalId"], "decision": "approve"}),
        ("decide_approval", {"approval_id": held_turn["approvalId"], "decision": "deny"}),
    )
    assert [a["id"] for a in value(pending)] == [held_turn["approvalId"]]
    approved = value(decided)
    assert (approved["status"], approved["decidedBy"]) == ("approved", f"tests-{served.port}")
    assert "already" in error_text(again)

    _, (hits, added, ticket, spend) = run_calls(
        served,
        ("search_memory", {"agent": "aki", "query": "harbour"}),
        ("add_memory", {"agent": "aki", "category": "core", "content": "likes tea"}),
        ("create_ticket", {"agent": "aki", "context": {"goal": "count the boats"}}),
        ("get_spend", {}),
    )
    assert any("harbour" in hit["content"] for hit in value(hits))
    assert value(added)["content"] == "likes tea"
    made = value(ticket)
    assert made["context"] == {"goal": "count the boats"}
    _, (read_back,) = run_calls(served, ("get_ticket", {"ticket_id": made["id"]}))
    assert (value(read_back)["id"], value(read_back)["agentName"]) == (made["id"], "aki")
    assert "steps" in value(read_back)
    figures = value(spend)
    assert {"fleet", "agents", "alerts"} <= set(figures)
    assert [a["name"] for a in figures["agents"]] == ["aki"]


def test_bad_arguments_give_error_results(served: ServedOpenCrab) -> None:
    _, (too_many, unknown, missing, extra, no_tool) = run_calls(
        served,
        ("search_memory", {"agent": "aki", "query": "x", "limit": 0}),
        ("search_memory", {"agent": "nobody", "query": "x"}),
        ("chat", {"agent": "aki"}),
        ("list_agents", {"colour": "red"}),
        ("launch_rockets", {}),
    )
    assert "limit" in error_text(too_many)
    assert "nobody" in error_text(unknown)
    assert "message" in error_text(missing)
    assert "colour" in error_text(extra)
    assert "launch_rockets" in error_text(no_tool)


def test_a_read_token_may_read_but_not_chat(served: ServedOpenCrab) -> None:
    exe, data = str(Path(sys.executable).parent / "opencrab"), str(served.data_dir)
    made = subprocess.run(
        [exe, "token", "create", "reader", "--scope", "read", "--json", "--data-dir", data],
        env=served.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    reader = json.loads(made.stdout)["token"]
    _, (listed, chatted) = run_calls(
        served, ("list_agents", {}), ("chat", {"agent": "aki", "message": "hi"}), token=reader
    )
    assert value(listed)
    assert "'read'" in error_text(chatted)
    assert "'chat'" in error_text(chatted)


def test_mcp_needs_a_token_and_refuses_other_sites(served: ServedOpenCrab) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    without = httpx.post(served.url + "/mcp", json=hello, headers=accept)
    assert without.status_code == 401
    wrong = httpx.post(
        served.url + "/mcp", json=hello, headers={**accept, "Authorization": "Bearer ocb_nope"}
    )
    assert wrong.status_code == 401
    other_site = {**accept, **served.headers, "Origin": "https://evil.example"}
    assert httpx.post(served.url + "/mcp", json=hello, headers=other_site).status_code == 403
    assert httpx.get(served.url + "/mcp", headers=other_site).status_code == 403
    rebound = {**accept, **served.headers, "Host": "evil.example"}
    assert httpx.post(served.url + "/mcp", json=hello, headers=rebound).status_code == 421


def json_rpc(answer: httpx.Response) -> Any:
    """The one JSON-RPC message of an answer, sent as JSON or as one SSE event."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        (data,) = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data)
    return answer.json()


def test_malformed_json_rpc_gets_json_rpc_errors_and_no_trace(served: ServedOpenCrab) -> None:
    accept = {"Accept": "application/json, text/event-stream", **served.headers}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"},
        },
    }
    with httpx.Client(base_url=served.url, headers=accept, timeout=60) as client:
        opened = client.post("/mcp", json=hello)
        assert opened.status_code == 200, opened.text
        session = {"MCP-Protocol-Version": "2025-06-18"}
        if "mcp-session-id" in opened.headers:
            session["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert client.post("/mcp", json=ready, headers=session).status_code == 202

        def sent(body: bytes | dict[str, Any] | list[Any]) -> httpx.Response:
            if isinstance(body, bytes):
                headers = {**session, "Content-Type": "application/json"}
                return client.post("/mcp", content=body, headers=headers)
            return client.post("/mcp", json=body, headers=session)

        cases: list[tuple[bytes | dict[str, Any] | list[Any], int]] = [
            (b"{not json", -32700),
            (b"\xff\xfe\x00", -32700),
            ({"hello": "there"}, -32600),
            ({"jsonrpc": "1.0", "id": 2, "method": "ping"}, -32600),
            ({"jsonrpc": "2.0", "id": 3, "method": "launch/rockets"}, -32601),
            ({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": 5}}, -32602),
            ({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "chat"}, -32600),
        ]
        for body, code in cases:
            answer = sent(body)
            assert "Traceback" not in answer.text
            assert answer.status_code in (200, 400), (body, answer.status_code, answer.text)
            error = json_rpc(answer)["error"]
            assert error["code"] == code, (body, answer.text)
            assert error["message"], answer.text
            assert "pydantic" not in error["message"], answer.text
            assert "there" not in error["message"]  # the value is never echoed
        named = json_rpc(sent({"jsonrpc": "2.0", "id": 6, "method": 7}))["error"]["message"]
        assert named == 'Invalid Request: "method" must be a string'
        # the session still works after all that
        ping = sent({"jsonrpc": "2.0", "id": 9, "method": "ping"})
        assert json_rpc(ping) == {"jsonrpc": "2.0", "id": 9, "result": {}}
        too_big = client.post(
            "/mcp", content=b'{"x":"' + b"x" * (20 * 1024 * 1024) + b'"}', headers=session
        )
        assert too_big.status_code == 413
        assert "Traceback" not in too_big.text
