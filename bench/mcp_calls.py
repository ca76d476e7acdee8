"""MCP overhead, each figure against its baseline measured in the same run.

(a) A tool call through OpenCrab's MCP client (an McpServerSource's tool, `execute`
    with a real ActionContext: the call, its timeout, the result made an ActionResult)
    against the same call made directly with the official SDK's ClientSession, over
    stdio and over streamable HTTP. Both sides talk to the same demo server
    (tests/fakes/mcp_demo_server.py, its `add` tool): over stdio each side has its own
    process of it, launched the same way (`[tools] sandbox = "none"`: the box is not
    what is measured); over HTTP both reach one server process. Target: at most 1.3x
    the direct call over stdio.
(b) The MCP server's `chat` tool (an SDK client on a real `opencrab up`'s /mcp) against
    a REST turn (`POST /api/sessions/{id}/messages`) on the same server, both answered
    by the same fake OpenAI server on loopback, each in its own session. Target: at
    most 10% more than the REST turn.

Calls alternate one by one, and which side goes first alternates, so machine noise hits
both alike. Prints p50 of each side, the baseline beside it and the ratio.

    python bench/mcp_calls.py [--calls N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from tests.fakes.mcp_demo import DEMO, demo_over_http
from tests.fakes.served_turns import AGENT, Call, rotate, served_turns

from opencrab.config import load_settings
from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.mcp.client import McpServerSource
from opencrab.mcp.client.tools import McpTool

ARGS = {"a": 20, "b": 22}


async def alternate(first: Call, second: Call, n: int, warm: int = 20) -> tuple[float, float]:
    """p50 seconds of `first` and of `second`, called alternately `n` times each."""
    a, b = await rotate([first, second], n, warm)
    return a, b


def tool_of(source: McpServerSource, name: str) -> McpTool:
    (tool,) = [a for a in source.actions() if isinstance(a, McpTool) and a.tool_name == name]
    return tool


async def client_overhead(calls: int) -> dict[str, tuple[float, float]]:
    """(a): {"stdio"|"http": (through OpenCrab p50, direct SDK p50)}."""
    with demo_over_http() as url, tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(env={"OPENCRAB_DATA_DIR": tmp})
        settings.tools.sandbox = "none"
        stdio = McpServerConfig(command=sys.executable, args=[str(DEMO)], call_timeout_secs=60)
        web = McpServerConfig(url=url, allow_private=True, call_timeout_secs=60)
        settings.mcp = McpSection(servers={"s": stdio, "h": web})
        params = StdioServerParameters(command=sys.executable, args=[str(DEMO)])
        results: dict[str, tuple[float, float]] = {}
        async with Runtime.open(settings) as runtime:
            agent = runtime.agents.create(AgentCreate(name="bench", prompt="You add."))
            ctx = runtime.action_context(agent)
            sources = await start_tool_sources(runtime)
            try:
                found = {s.namespace: s for s in sources.started}
                ours = {
                    "stdio": tool_of(found["mcp__s"], "add"),  # type: ignore[arg-type]
                    "http": tool_of(found["mcp__h"], "add"),  # type: ignore[arg-type]
                }
                for transport, tool in ours.items():
                    async with _direct(transport, params, url) as session:

                        async def direct(session: ClientSession = session) -> None:
                            result = await session.call_tool("add", ARGS)
                            assert not result.is_error

                        async def through(tool: McpTool = tool) -> None:
                            result = await tool.execute(ARGS, ctx)
                            assert result.success, result.error

                        results[transport] = await alternate(through, direct, calls)
            finally:
                await sources.stop()
    return results


class _direct:
    """An initialized SDK ClientSession on the demo server over `transport`."""

    def __init__(self, transport: str, params: StdioServerParameters, url: str) -> None:
        self.transport, self.params, self.url = transport, params, url
        self.stack: Any = None

    async def __aenter__(self) -> ClientSession:
        from contextlib import AsyncExitStack

        self.stack = AsyncExitStack()
        if self.transport == "stdio":
            read, write = await self.stack.enter_async_context(stdio_client(self.params))
        else:
            client = await self.stack.enter_async_context(httpx2.AsyncClient(timeout=60))
            read, write, *_ = await self.stack.enter_async_context(
                streamable_http_client(self.url, http_client=client)
            )
        session = await self.stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()


async def chat_overhead(turns: int) -> list[float]:
    """(b): p50 of the MCP chat tool (plain JSON-RPC POSTs with the REST side's HTTP
    client; the SDK's ClientSession) and of the REST turn, on one served OpenCrab."""
    async with (
        served_turns() as on,
        httpx2.AsyncClient(headers=on.served.headers, timeout=120) as client,
        streamable_http_client(on.served.url + "/mcp", http_client=client) as streams,
        ClientSession(streams[0], streams[1]) as mcp,
    ):
        rest = on.rest
        await mcp.initialize()
        first = await mcp.call_tool("chat", {"agent": AGENT, "message": "hello"})
        assert not first.is_error, first.content
        assert first.structured_content is not None or first.content
        mcp_session = _session_of(first)

        async def by_sdk() -> None:
            args = {"agent": AGENT, "message": "count", "session_id": mcp_session}
            result = await mcp.call_tool("chat", args)
            assert not result.is_error, result.content

        plain = await _plain_session(rest)
        numbers = iter(range(10, 10**9))

        async def by_mcp() -> None:
            args = {"agent": AGENT, "message": "count", "session_id": plain_session}
            said = await rest.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": next(numbers),
                    "method": "tools/call",
                    "params": {"name": "chat", "arguments": args},
                },
                headers=plain,
            )
            assert said.status_code == 200, said.text
            assert not _json_rpc(said)["result"].get("isError"), said.text

        plain_session = _session_of_text(
            _json_rpc(
                await rest.post(
                    "/mcp",
                    json={
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "tools/call",
                        "params": {
                            "name": "chat",
                            "arguments": {"agent": AGENT, "message": "hello"},
                        },
                    },
                    headers=plain,
                )
            )["result"]["content"][0]["text"]
        )

        await on.rest_turn()  # each side's session holds one turn before the runs
        return await rotate([by_mcp, by_sdk, on.rest_turn], turns, warm=5)


async def _plain_session(rest: httpx.AsyncClient) -> dict[str, str]:
    """The headers of an MCP session opened with plain JSON-RPC POSTs on `rest`."""
    headers = {"Accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    opened = await rest.post("/mcp", json=hello, headers=headers)
    assert opened.status_code == 200, opened.text
    headers["MCP-Protocol-Version"] = "2025-06-18"
    if "mcp-session-id" in opened.headers:
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await rest.post("/mcp", json=ready, headers=headers)).status_code == 202
    return headers


def _json_rpc(answer: httpx.Response) -> Any:
    """The JSON-RPC message of an answer sent as JSON or as one SSE event."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        (data,) = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data)
    return answer.json()


def _session_of(result: Any) -> str:
    return _session_of_text(result.content[0].text)


def _session_of_text(text: str) -> str:
    return str(json.loads(text)["sessionId"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="tool calls of each side")
    parser.add_argument("--turns", type=int, default=60, help="chat turns of each side")
    args = parser.parse_args()
    ms = 1000
    client = asyncio.run(client_overhead(args.calls))
    print(f"(a) MCP tool call ({args.calls} of each side, alternating), p50:")
    for transport, (ours, direct) in client.items():
        ratio = ours / direct
        target = " (target <= 1.3x: " + ("met" if ratio <= 1.3 else "NOT met") + ")"
        print(
            f"    {transport:5}  through OpenCrab {ours * ms:7.3f} ms   "
            f"direct SDK {direct * ms:7.3f} ms   ratio {ratio:.2f}x"
            + (target if transport == "stdio" else "")
        )
    by_mcp, by_sdk, by_rest = asyncio.run(chat_overhead(args.turns))
    extra = by_mcp / by_rest - 1
    print(f"(b) chat turn ({args.turns} of each side, in turn), p50:")
    print(
        f"    MCP chat tool {by_mcp * ms:7.3f} ms   REST turn {by_rest * ms:7.3f} ms   "
        f"ratio {by_mcp / by_rest:.2f}x ({extra:+.1%}; target <= +10%: "
        + ("met" if extra <= 0.10 else "NOT met")
        + "); both over the same httpx client"
    )
    print(
        f"    the same tool through the SDK's ClientSession {by_sdk * ms:7.3f} ms "
        f"(ratio {by_sdk / by_rest:.2f}x: the SDK client's own cost on top)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
