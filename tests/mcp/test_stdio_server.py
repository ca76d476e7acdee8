"""An MCP server over stdio as a tool source: its tools granted, called in turns, held
for approval by their annotations, re-listed on list_changed; a hostile server fails
its calls with errors naming it while the rest works; a crashed one is started again."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from pathlib import Path

import pytest

from opencrab.actions.base import ToolSource
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config.mcp import McpSection, McpServerConfig
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import RunningToolSources, start_tool_sources
from opencrab.core.tools import offered_tools, tool_id
from opencrab.core.workspace import Workspace
from opencrab.events import ToolResultEvent
from opencrab.llm.providers import anthropic_wire
from opencrab.llm.types import ImagePart
from opencrab.mcp.client import McpServerSource
from opencrab.store.repositories import tools as tools_repo
from tests.core.conftest import calls, speak
from tests.fakes.mcp_demo import DEMO, demo_stdio
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import offered_when, script
from tests.mcp.conftest import outcome


def tool_stored(runtime: Runtime, name: str) -> bool:
    with runtime.db.read() as conn:
        return tools_repo.tool_by_id(conn, tool_id(name)) is not None


def grant(runtime: Runtime, agent: Agent, *names: str) -> None:
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(n) for n in names]))


async def test_a_granted_mcp_tool_is_called_in_a_turn_and_an_ungranted_one_refused(
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    demo: McpServerSource,
    sources: RunningToolSources,
) -> None:
    assert demo.state == "running"
    assert {"mcp__demo__add", "mcp__demo__wipe"} <= set(runtime.registry.names())
    assert "mcp__demo__add" in {row.name for row in offered_tools(runtime.db, runtime.registry)}
    grant(runtime, agent, "mcp__demo__add")
    script(scripted, calls(("mcp__demo__add", {"a": 2, "b": 3})), speak("five"))
    result = await runtime.chat(agent, "add 2 and 3")
    success, said = outcome(result, "mcp__demo__add")
    assert success
    assert json.loads(said) == {"text": "5", "structured": {"result": 5}}
    offered = {t.name for t in scripted.requests[0].tools or []}
    assert "mcp__demo__add" in offered
    assert "mcp__demo__wipe" not in offered  # offered by the server, not granted
    schema = next(t for t in scripted.requests[0].tools or [] if t.name == "mcp__demo__add")
    assert schema.parameters["properties"]["a"]["type"] == "integer"  # the server's own

    other = runtime.agents.create(AgentCreate(name="bo", prompt="You use tools."))
    script(scripted, calls(("mcp__demo__add", {"a": 1, "b": 1})), speak("no"))
    refused = await runtime.chat(other, "add 1 and 1")
    success, said = outcome(refused, "mcp__demo__add")
    assert not success
    assert "you may not call 'mcp__demo__add'" in said


async def test_a_tool_whose_schema_is_no_json_schema_is_left_out_naming_server_and_tool(
    runtime: Runtime, caplog: pytest.LogCaptureFixture, sources: RunningToolSources
) -> None:
    assert "mcp__demo__broken" not in runtime.registry
    assert "mcp__demo__add" in runtime.registry
    said = [r.getMessage() for r in caplog.get_records("setup") if r.levelno == logging.ERROR]
    assert any(
        "MCP server demo: tool 'broken' left out: its input schema is no JSON Schema" in line
        for line in said
    )


async def test_unsafe_holds_a_destructive_mcp_tool_and_lets_a_read_only_one_run(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    grant(runtime, agent, "mcp__demo__add", "mcp__demo__wipe", "mcp__demo__environment")
    policies = dict.fromkeys(("mcp__demo__add", "mcp__demo__wipe"), "unsafe")
    save_tool_settings(runtime.db, agent.id, ToolSettings(approvals=policies))  # type: ignore[arg-type]
    script(scripted, calls(("mcp__demo__add", {"a": 1, "b": 2})), speak("three"))
    ran = await runtime.turns.chat(agent, "add")
    assert ran.stopped_by != "approval"
    assert outcome(ran, "mcp__demo__add")[0]

    script(scripted, calls(("mcp__demo__wipe", {})))
    held = await runtime.turns.chat(agent, "wipe it")
    assert held.stopped_by == "approval"
    [pending] = runtime.approvals.list_approvals(session_id=held.session_id)
    assert pending.tool_name == "mcp__demo__wipe"
    assert pending.id == held.approval_id

    # approved, the call goes to the server once and its answer is the call's result
    decided = await runtime.approvals.decide(pending.id, approve=True, by="ops")
    assert decided.status == "approved"
    [event] = [
        e
        for e in runtime.engine.events.trace(held.trace_id)
        if str(e.id) == decided.result_event_id
    ]
    assert isinstance(event, ToolResultEvent)
    assert not event.content.is_error
    assert json.loads(event.content.output)["text"] == "wiped"


async def test_list_changed_offers_the_new_list(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    assert "mcp__demo__extra" not in runtime.registry
    grant(runtime, agent, "mcp__demo__grow")
    script(scripted, calls(("mcp__demo__grow", {})), speak("grown"))
    grown = await runtime.chat(agent, "grow")
    assert outcome(grown, "mcp__demo__grow")[0]
    await offered_when(demo, lambda: "mcp__demo__extra" in runtime.registry)
    async with asyncio.timeout(60):  # the change's tools row is written just after (mirror)
        while not tool_stored(runtime, "mcp__demo__extra"):
            await asyncio.sleep(0.05)
    grant(runtime, agent, "mcp__demo__grow", "mcp__demo__extra")
    script(scripted, calls(("mcp__demo__extra", {})), speak("extra"))
    extra = await runtime.chat(agent, "the new one", session_id=grown.session_id)
    success, said = outcome(extra, "mcp__demo__extra")
    assert success
    assert json.loads(said)["text"] == "extra!"


@pytest.mark.parametrize(
    "servers",
    # the hang waits for its own server's short call timeout; the 3 MB answer of
    # `huge` may take a loaded machine more than a second to make and read
    [{"demo": demo_stdio(call_timeout_secs=60), "stuck": demo_stdio(call_timeout_secs=1)}],
)
async def test_a_hostile_server_fails_its_calls_naming_it_and_the_rest_works(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    names = ("huge", "garble", "add", "crash")
    grant(runtime, agent, "mcp__stuck__hang", *(f"mcp__demo__{n}" for n in names))
    script(scripted, calls(("mcp__stuck__hang", {})), speak("late"))
    hung = await runtime.chat(agent, "hang")
    success, said = outcome(hung, "mcp__stuck__hang")
    assert not success
    assert "MCP server 'stuck' did not answer hang within 1 s" in said
    assert "[mcp.servers.stuck] call_timeout_secs" in said

    script(scripted, calls(("mcp__demo__huge", {})), speak("big"))
    big = await runtime.chat(agent, "huge")
    success, said = outcome(big, "mcp__demo__huge")
    cap = runtime.settings.agent.max_event_bytes
    assert success, said
    assert len(said.encode()) < cap + 1024  # capped like any record, not 3 MB
    assert json.loads(said)["cut"] == {"text": 3_000_000}

    script(scripted, calls(("mcp__demo__garble", {})), speak("garbled"))
    garbled = await runtime.chat(agent, "garble")
    assert outcome(garbled, "mcp__demo__garble")[0]

    script(scripted, calls(("mcp__demo__add", {"a": 4, "b": 4})), speak("eight"))
    after = await runtime.chat(agent, "add")
    assert json.loads(outcome(after, "mcp__demo__add")[1])["text"] == "8"
    assert demo.state == "running"
    offered_after_start = len(demo.actions())

    seen: list[tuple[str, str | None, int]] = []

    async def journal(_: ToolSource) -> None:
        seen.append((demo.state, demo.last_error, len(demo.actions())))

    demo.subscribe(journal)
    script(scripted, calls(("mcp__demo__crash", {})), speak("crashed"))
    crashed = await runtime.chat(agent, "crash")
    success, said = outcome(crashed, "mcp__demo__crash")
    assert not success
    assert "MCP server 'demo'" in said
    await offered_when(demo, lambda: demo.restarts == 1 and demo.state == "running")
    status = demo.status()
    assert (status["state"], status["restarts"], status["last_error"]) == ("running", 1, None)
    assert "add" in status["tools"]
    (failed, error, offered), (running, _, again) = seen  # tools withdrawn, then back
    assert (failed, offered, running) == ("failed", 0, "running")
    assert "the connection ended" in (error or "")
    assert again == offered_after_start
    script(scripted, calls(("mcp__demo__add", {"a": 5, "b": 5})), speak("ten"))
    again = await runtime.chat(agent, "add")
    assert json.loads(outcome(again, "mcp__demo__add")[1])["text"] == "10"


@pytest.mark.parametrize("servers", [{"demo": demo_stdio(call_timeout_secs=600)}])
async def test_a_hanging_call_is_cut_by_the_turns_deadline(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    # the call may wait 600 s; the turn may run 3 s
    runtime.settings.agent.turn_timeout_secs = 3.0
    grant(runtime, agent, "mcp__demo__hang", "mcp__demo__add")
    script(scripted, calls(("mcp__demo__hang", {})), speak("late"))
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(120):  # a guard against a hang, not a measure
        hung = await runtime.chat(agent, "hang")
    assert loop.time() - began < 60
    success, said = outcome(hung, "mcp__demo__hang")
    assert not success
    assert "MCP server 'demo': hang was cut off by the turn's deadline" in said
    assert "([agent] turn_timeout_secs)" in said
    assert hung.error is not None
    assert "turn_timeout_secs" in hung.error.message

    runtime.settings.agent.turn_timeout_secs = 300.0  # the server still answers
    script(scripted, calls(("mcp__demo__add", {"a": 1, "b": 1})), speak("two"))
    after = await runtime.chat(agent, "add")
    assert json.loads(outcome(after, "mcp__demo__add")[1])["text"] == "2"


async def test_an_image_and_a_blob_become_attachments_the_model_is_shown(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    grant(runtime, agent, "mcp__demo__picture")
    script(scripted, calls(("mcp__demo__picture", {})), speak("seen"))
    result = await runtime.chat(agent, "show me")
    (done,) = [a for a in result.actions if a.name == "mcp__demo__picture"]
    assert done.result.success
    said = json.loads(done.result.output())
    assert said["text"] == "a red dot"
    image, pdf = said["content"]
    workspace = Workspace.for_agent(runtime.settings, str(agent.id))
    png = workspace.read_bytes(image["path"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert image == {"type": "image", "mime_type": "image/png", "bytes": len(png)} | {
        "path": image["path"]
    }
    assert image["path"].startswith("mcp/demo/picture-")
    assert image["path"].endswith(".png")
    assert pdf["uri"] == "file:///report.pdf"
    assert pdf["path"].endswith(".pdf")
    assert workspace.read_bytes(pdf["path"]).startswith(b"%PDF-1.4")
    written = [e.path for e in done.result.side_effects if e.type == "file_written"]
    assert written == [image["path"], pdf["path"]]

    # the model's next request holds the tool result with the image beside its text …
    (tool,) = [m for m in scripted.requests[1].messages if m.role == "tool"]
    (shown,) = [p for p in tool.parts if isinstance(p, ImagePart)]
    assert shown.data() == ("image/png", base64.b64encode(png).decode())
    assert json.loads(tool.text) == said
    # … which Anthropic's wire format sends as an image block inside the tool_result
    _, turns = anthropic_wire.wire_messages(scripted.requests[1].messages)
    (block,) = [b for t in turns for b in t["content"] if b["type"] == "tool_result"]
    kinds = [part["type"] for part in block["content"]]
    assert kinds == ["text", "image"]
    assert block["content"][1]["source"]["media_type"] == "image/png"
    # the recorded result keeps the description only, never the bytes
    assert "base64" not in done.result.model_dump_json()


async def test_an_image_whose_bytes_are_not_its_type_is_left_out_saying_why(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, demo: McpServerSource
) -> None:
    grant(runtime, agent, "mcp__demo__forged")
    script(scripted, calls(("mcp__demo__forged", {})), speak("refused"))
    result = await runtime.chat(agent, "show me")
    (done,) = [a for a in result.actions if a.name == "mcp__demo__forged"]
    forged, svg, enormous = json.loads(done.result.output())["content"]
    assert forged["error"] == "left out: its bytes are no image/png"
    assert "path" not in forged
    assert svg["error"].startswith("left out: image/svg+xml is no image type a model is shown")
    assert enormous["error"] == f"left out: over {5 * 1024 * 1024} bytes"
    assert enormous["bytes"] == 5 * 1024 * 1024 + 8
    assert done.result.side_effects == []
    assert done.result.images == []
    workspace = Workspace.for_agent(runtime.settings, str(agent.id))
    assert not workspace.exists("mcp/demo")


async def test_stopping_the_sources_ends_the_servers_process(
    runtime: Runtime, sources: RunningToolSources, demo: McpServerSource
) -> None:
    marker = str(DEMO)
    assert any(marker in line for line in _command_lines())  # running now
    await sources.stop()
    assert demo.state == "stopped"
    assert "mcp__demo__add" not in runtime.registry
    for _ in range(600):  # its process tree is being killed; gone within moments
        if not any(marker in line for line in _command_lines()):
            break
        await asyncio.sleep(0.05)
    assert not any(marker in line for line in _command_lines())


def _command_lines() -> list[str]:
    """The command line of every process of this machine we can read."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return lines


@pytest.mark.parametrize(
    "servers",
    [
        {
            "mute": McpServerConfig(
                command="/bin/sh",
                args=["-c", "echo this is no JSON-RPC; exec sleep 600"],
                start_timeout_secs=1,
            ),
            "demo": demo_stdio(),
        }
    ],
)
async def test_a_server_that_never_answers_initialize_is_named_and_the_others_run(
    runtime: Runtime, sources: RunningToolSources
) -> None:
    reason = sources.failed["mcp__mute"]
    assert "MCP server 'mute': no answer to initialize and tools/list within 1 s" in reason
    assert "[mcp.servers.mute] start_timeout_secs" in reason
    assert any("tool source mcp__mute did not start" in n for n in runtime.notices)
    assert "mcp__demo__add" in runtime.registry


async def test_a_stdio_server_that_fails_at_start_is_tried_again_with_backoff(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, tmp_path: Path
) -> None:
    folder = tmp_path / "later"
    folder.mkdir()
    script_path = folder / "server.py"  # not there yet: the first launches exit at once
    table = demo_stdio(call_timeout_secs=10)
    table = table.model_copy(
        update={"args": [str(script_path)], "read_paths": [*table.read_paths, str(folder)]}
    )
    runtime.settings.mcp = McpSection(servers={"later": table})
    sources = await start_tool_sources(runtime)
    try:
        reason = sources.failed["mcp__later"]
        assert "MCP server 'later'" in reason
        assert "trying again in 1 s" in reason
        assert "server.py" in reason  # Python's own complaint, from its stderr
        (later,) = sources.started
        assert isinstance(later, McpServerSource)
        assert "mcp__later__add" not in runtime.registry

        script_path.write_text(DEMO.read_text())
        await offered_when(later, lambda: later.state == "running")
        assert later.restarts >= 1
        assert later.last_error is None
        grant(runtime, agent, "mcp__later__add")
        script(scripted, calls(("mcp__later__add", {"a": 3, "b": 4})), speak("seven"))
        result = await runtime.chat(agent, "add")
        assert json.loads(outcome(result, "mcp__later__add")[1])["text"] == "7"
    finally:
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            await sources.stop()
    assert later.state == "stopped"
    assert not any(str(script_path) in line for line in _command_lines())


@pytest.mark.parametrize(
    "servers", [{"demo": demo_stdio(env={"DEMO_TWIN": "1"}), "other": demo_stdio()}]
)
async def test_a_tool_listed_twice_keeps_the_first_naming_the_server(
    runtime: Runtime, caplog: pytest.LogCaptureFixture, demo: McpServerSource
) -> None:
    said = [r.getMessage() for r in caplog.get_records("setup") if r.levelno == logging.ERROR]
    assert "MCP server demo: tool 'add' is listed twice; the first one is kept" in said
    (add,) = [a for a in demo.actions() if a.definition().name == "add"]
    assert add.definition().description == "Add two integers."
    assert demo.state == "running"
    # the same tool names on another server are no clash: each has its own namespace
    assert {"mcp__demo__add", "mcp__other__add"} <= set(runtime.registry.names())


STUCK = "if [ -e once ]; then exec sleep 43217; else touch once; exit 3; fi"


@pytest.mark.parametrize(
    "servers",
    [{"stuck": McpServerConfig(command="/bin/sh", args=["-c", STUCK], start_timeout_secs=600)}],
)
async def test_stopping_a_server_being_tried_again_ends_its_process(
    runtime: Runtime, sources: RunningToolSources
) -> None:
    assert "Connection closed; trying again in 1 s" in sources.failed["mcp__stuck"]
    (stuck,) = sources.started
    assert isinstance(stuck, McpServerSource)
    async with asyncio.timeout(60):  # the second launch: alive, never answering initialize
        while not any("sleep 43217" in line for line in _command_lines()):
            await asyncio.sleep(0.05)
    async with asyncio.timeout(60):  # a guard against a hang, not a measure
        await sources.stop()
    assert stuck.state == "stopped"
    for _ in range(600):  # its process tree is being killed; gone within moments
        if not any("sleep 43217" in line for line in _command_lines()):
            break
        await asyncio.sleep(0.05)
    assert not any("sleep 43217" in line for line in _command_lines())
