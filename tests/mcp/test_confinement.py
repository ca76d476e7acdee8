"""What a stdio MCP server may touch: inside bubblewrap it reads only what its table
lets it (and writes its scratch folder), and its environment holds no key of ours."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from opencrab.core.agent import Agent, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.core.tools import tool_id
from opencrab.mcp.client import McpServerSource
from opencrab.mcp.client.launch import BOX_HOME, SAFE_PATH, scratch_dir
from tests.core.conftest import calls, speak
from tests.fakes.mcp_demo import demo_stdio
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import script
from tests.mcp.conftest import outcome


def grant(runtime: Runtime, agent: Agent, *names: str) -> None:
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(n) for n in names]))


async def test_a_boxed_server_reads_its_scratch_folder_and_nothing_outside(
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    data_dir: Path,
    demo: McpServerSource,
) -> None:
    assert shutil.which("bwrap") is not None  # the machine's bubblewrap boxes it
    assert demo.sandbox == "bwrap"
    secret = data_dir.parent / "secret.txt"
    secret.write_text("the server must not read this")
    (scratch_dir(runtime.settings, "demo") / "note.txt").write_text("mine to read")
    grant(runtime, agent, "mcp__demo__read_path")
    script(
        scripted,
        calls(
            ("mcp__demo__read_path", {"path": str(secret)}),
            ("mcp__demo__read_path", {"path": f"{BOX_HOME}/note.txt"}),
        ),
        speak("read"),
    )
    result = await runtime.chat(agent, "read both")
    outside, inside = (a.result for a in result.actions if a.name == "mcp__demo__read_path")
    assert not outside.success
    assert "MCP server 'demo': read_path reported an error" in (outside.error or "")
    assert "No such file or directory" in (outside.error or "")
    assert "must not read" not in outside.output()
    assert inside.success
    assert inside.data["text"] == "mine to read"


@pytest.mark.parametrize("servers", [{"demo": demo_stdio(env={"DEMO_FLAG": "on"})}])
async def test_no_key_of_the_server_reaches_an_mcp_server(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-leaks")
    monkeypatch.setenv("OPENCRAB_SECRET_KEY", "never-either")
    sources = await start_tool_sources(runtime)  # launched with the keys set
    try:
        grant(runtime, agent, "mcp__demo__environment")
        script(scripted, calls(("mcp__demo__environment", {})), speak("seen"))
        result = await runtime.chat(agent, "your environment?")
        success, said = outcome(result, "mcp__demo__environment")
        assert success
        env = json.loads(said)["structured"]
        assert "sk-never-leaks" not in said
        assert "never-either" not in said
        assert not {k for k in env if k.startswith("OPENCRAB_") or k.endswith("_API_KEY")}
        assert env["DEMO_FLAG"] == "on"
        assert (env["PATH"], env["HOME"], env["LANG"]) == (SAFE_PATH, BOX_HOME, "C.UTF-8")
    finally:
        await sources.stop()


@pytest.mark.parametrize(
    ("servers", "reached"),
    [
        ({"demo": demo_stdio()}, False),
        ({"demo": demo_stdio(network=True)}, True),
    ],
    ids=["no network", "network = true"],
)
async def test_a_boxed_server_reaches_the_network_only_when_its_table_says_so(
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    demo: McpServerSource,
    reached: bool,
) -> None:
    with socket.socket() as listener:  # ours, on the host's loopback
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        grant(runtime, agent, "mcp__demo__reach")
        script(scripted, calls(("mcp__demo__reach", {"port": port})), speak("tried"))
        result = await runtime.chat(agent, "reach it")
    said = json.loads(outcome(result, "mcp__demo__reach")[1])["text"]
    assert (said == "connected") is reached, said
