"""The real Claude Code and Codex CLIs (clis/node_modules) as clients of OpenCrab's MCP
server: each session is driven by the scripted model on 127.0.0.1 (Claude Code over the
Messages API, Codex over the Responses API), whose first answer calls
`mcp__opencrab__chat` (Claude Code) or the `opencrab` server's `chat` (Codex) on a real
`opencrab up`; the CLI calls it over streamable HTTP with the bearer token, OpenCrab's
agent answers through the fake OpenAI server, and what the CLI sends back to the model as
the tool's result holds OpenCrab's reply. Each CLI runs with its own temporary HOME (and
CODEX_HOME), offline: anything beyond loopback goes to a closed proxy; ~/.claude and
~/.codex are never read."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.coding_models import ScriptedModel, Text, ToolCall
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.served import ServedOpenCrab

CLIS_BIN = Path(__file__).resolve().parents[2] / "clis" / "node_modules" / ".bin"
OFFLINE = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}
ANSWER = "Seven boats in the harbour — 港に七隻"


@pytest.fixture
def served(data_dir: Path, fake_llm_server: FakeLlmServer) -> Iterator[ServedOpenCrab]:
    with ServedOpenCrab(data_dir, llm=fake_llm_server) as server:
        agent = {"name": "aki", "prompt": "You count boats."}
        made = httpx.post(server.url + "/api/agents", json=agent, headers=server.headers)
        assert made.status_code == 201, made.text
        fake_llm_server.reply(CHAT, Reply(json=completion({"content": ANSWER})))
        yield server


def run(argv: list[str], home: Path, env: dict[str, str], stdin: str | None = None) -> str:
    """Run a CLI in `home` with only `env` (plus PATH); its output, or fail showing it."""
    done = subprocess.run(
        argv,
        env={"PATH": os.environ["PATH"], "HOME": str(home), **OFFLINE, **env},
        cwd=home,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=300,  # a guard against a hang, not a measure
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def tool_results(model: ScriptedModel) -> list[str]:
    """The text of every tool result the CLI sent back to the model, in order."""
    found: list[str] = []
    for request in model.requests:
        body = request.json or {}
        for message in body.get("messages") or []:  # Messages API
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(_text(block.get("content")))
        for item in body.get("input") or []:  # Responses API
            if item.get("type") == "function_call_output":
                found.append(_text(item.get("output")))
    return found


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(part.get("text", part)) for part in content if part)
    if isinstance(content, dict):
        return _text(content.get("content") or content.get("text") or "")
    return str(content)


def offered(model: ScriptedModel) -> set[str]:
    """The tool names the CLI offered the model in its first agent-loop request."""
    body = model.requests[0].json or {}
    return {str(t.get("name")) for t in body.get("tools") or []}


def test_claude_code_calls_opencrabs_chat_tool(
    served: ServedOpenCrab, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    asked = {"agent": "aki", "message": "How many boats?"}
    model = ScriptedModel(
        [ToolCall("mcp__opencrab__chat", asked), Text("Aki says seven.")]
    ).serve_anthropic(fake_llm_server)
    config = {
        "mcpServers": {
            "opencrab": {
                "type": "http",
                "url": served.url + "/mcp",
                "headers": {"Authorization": f"Bearer {served.token}"},
            }
        }
    }
    said = run(
        [
            str(CLIS_BIN / "claude"),
            "-p",
            "Ask aki how many boats there are.",
            "--mcp-config",
            json.dumps(config),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__opencrab__chat",
            "--output-format",
            "text",
        ],
        home,
        {
            "IS_SANDBOX": "1",
            "ENABLE_TOOL_SEARCH": "false",  # MCP tools offered as they are, not deferred
            "ANTHROPIC_BASE_URL": fake_llm_server.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        },
    )
    assert "Aki says seven." in said
    assert "mcp__opencrab__chat" in offered(model)
    (result,) = tool_results(model)
    turn = json.loads(result)
    assert turn["reply"] == ANSWER
    assert turn["cost"]["modelCalls"] == 1
    asked_aki = [json.dumps(r.json) for r in fake_llm_server.requests_to(CHAT)]
    assert any("How many boats?" in body for body in asked_aki)


def test_codex_calls_opencrabs_chat_tool(
    served: ServedOpenCrab, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        "\n".join(
            [
                'model = "gpt-5-codex"',
                'model_provider = "fake"',
                "check_for_update_on_startup = false",
                "",
                "[model_providers.fake]",
                'name = "fake"',
                f'base_url = "{fake_llm_server.url}/v1"',
                'wire_api = "responses"',
                'env_key = "FAKE_OPENAI_KEY"',
                "",
                "[mcp_servers.opencrab]",
                f'url = "{served.url}/mcp"',
                'bearer_token_env_var = "OPENCRAB_TOKEN"',
                "",
            ]
        )
    )
    asked = {"agent": "aki", "message": "How many boats?"}
    # Codex offers an MCP server's tools in a Responses API namespace `mcp__<server>`
    model = ScriptedModel(
        [ToolCall("chat", asked, namespace="mcp__opencrab"), Text("Aki says seven.")]
    ).serve_responses(fake_llm_server)
    said = run(
        [
            str(CLIS_BIN / "codex"),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "Ask aki how many boats there are.",
        ],
        home,
        {
            "CODEX_HOME": str(codex_home),
            "FAKE_OPENAI_KEY": "sk-test",
            "OPENCRAB_TOKEN": served.token,
        },
    )
    assert "Aki says seven." in said
    (namespace,) = [t for t in model.requests[0].json["tools"] if t.get("name") == "mcp__opencrab"]
    assert namespace["type"] == "namespace"
    assert "chat" in {t["name"] for t in namespace["tools"]}
    (result,) = tool_results(model)
    assert "Output:\n" in result, result  # Codex puts the call's wall time first
    turn = json.loads(result.split("Output:\n", 1)[1])
    assert turn["reply"] == ANSWER
    assert turn["cost"]["modelCalls"] == 1
