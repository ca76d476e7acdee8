"""`opencrab mcp`: the official SDK's stdio client against a real `opencrab mcp` subprocess,
configured as the README tells a user (the provider's base_url in the TOML config), its
agent thinking through the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from opencrab.cli import build_app
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.ports import closed_port

USAGE = {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}


@pytest.fixture
def config(data_dir: Path, fake_llm_server: FakeLlmServer) -> Path:
    closed = f"http://127.0.0.1:{closed_port()}"
    path = data_dir.parent / "opencrab.toml"
    path.write_text(
        f'[llm.providers.openai]\nbase_url = "{fake_llm_server.url}/v1"\n\n'
        f'[llm.providers.ollama]\nbase_url = "{closed}"\n\n'
        f'[llm.providers.llamacpp]\nbase_url = "{closed}"\n',
        encoding="utf-8",
    )
    made = CliRunner().invoke(
        build_app(),
        ["agent", "create", "--name", "aki", "--prompt", "You are terse.", "--config", str(path)],
    )
    assert made.exit_code == 0, made.output
    return path


async def _with_session(config: Path, data_dir: Path, body: Any) -> Any:
    server = StdioServerParameters(
        command=str(Path(sys.executable).parent / "opencrab"),
        args=["mcp", "--config", str(config), "--data-dir", str(data_dir)],
        env={"OPENAI_API_KEY": "sk-test"},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await body(session)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_a_client_chats_and_reads_a_persona_over_stdio(
    config: Path, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "Ahoy"}, usage=USAGE)))

    async def body(session: ClientSession) -> Any:
        tools = await session.list_tools()
        chatted = await session.call_tool("chat", {"agent": "aki", "message": "hello"})
        bad = await session.call_tool("chat", {"agent": "aki", "message": "x" * 100_001})
        resources = await session.list_resources()
        persona = await session.read_resource(resources.resources[0].uri)
        with pytest.raises(MCPError, match="no resource"):
            await session.read_resource("opencrab://agents/aki/diary")
        return tools, chatted, bad, resources, persona

    tools, chatted, bad, resources, persona = asyncio.run(_with_session(config, data_dir, body))
    assert "chat" in {t.name for t in tools.tools}
    assert not chatted.is_error, text_of(chatted)
    turn = json.loads(text_of(chatted))
    assert turn["reply"] == "Ahoy"
    assert (turn["cost"]["inputTokens"], turn["cost"]["outputTokens"]) == (30, 5)
    assert turn == chatted.structured_content
    assert bad.is_error
    assert "message" in text_of(bad)
    assert "100000 characters" in text_of(bad)
    assert [str(r.uri) for r in resources.resources] == ["opencrab://agents/aki/persona"]
    contents = persona.contents[0]
    assert isinstance(contents, types.TextResourceContents)
    doc = json.loads(contents.text)
    assert doc["agent"] == "aki"
    assert {"soul", "identity"} <= set(doc)
    sent = fake_llm_server.requests[-1].json
    assert sent["messages"][-1]["content"] == "hello"
