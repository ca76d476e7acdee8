"""Remote A2A agents as tools: the official a2a-sdk server (tests/fakes/a2a_remote.py,
served by uvicorn on 127.0.0.1) called by an OpenCrab agent in real turns whose model is
a ScriptedProvider: its reply, a task polled until it completes (with an artifact's
file stored), a task asking for input answered, a failed task, the card read again, the
SSRF guard, a hanging remote cut by the turn's deadline, a remote that went down, and a
tool that is not granted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from opencrab.a2a.client_source import A2aRemoteSource
from opencrab.actions.tool_settings import ToolSettings, save_tool_settings
from opencrab.config import Settings, load_settings
from opencrab.config.a2a import A2aSection
from opencrab.config.a2a_remotes import A2aRemoteConfig
from opencrab.config.secret_key import SecretBox
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate
from opencrab.core.runtime import Runtime
from opencrab.core.steps import ActionDone, TurnResult
from opencrab.core.tool_sources import RunningToolSources, start_tool_sources
from opencrab.core.tools import tool_id
from opencrab.core.workspace import Workspace
from opencrab.events import ToolResultEvent
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.a2a_remote import PNG, RemoteAgent
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import offered_when, running_sources, script, scripted_runtime
from tests.fakes.threaded_server import serve_in_thread

TOOL = "a2a__echo__ask"


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def shared() -> Iterator[RemoteAgent]:
    """One remote agent served for the module's tests."""
    remote = RemoteAgent(free_port())
    with serve_in_thread(remote.app(), remote.port):
        try:
            yield remote
        finally:
            remote.release.set()  # a slow or hanging task still waiting ends now


@pytest.fixture
def remote(shared: RemoteAgent) -> Iterator[RemoteAgent]:
    """The served remote agent, as each test begins: its card's first interface JSON-RPC,
    its description the first, its slow tasks held, no authorization seen."""
    shared.binding = "JSONRPC"
    shared.interface_url = shared.url
    shared.card_description = RemoteAgent.DESCRIPTION
    shared.release.clear()
    shared.authorizations.clear()
    yield shared
    shared.release.set()


@pytest.fixture
def served(remote: RemoteAgent) -> RemoteAgent:
    return remote


@pytest.fixture
def table(remote: RemoteAgent) -> dict[str, Any]:
    """The `[a2a.remotes.echo]` table of the test."""
    return {"url": remote.url, "allow_private": True, "wait_secs": 30}


@pytest.fixture
def settings(data_dir: Path, table: dict[str, Any]) -> Settings:
    loaded = load_settings()
    loaded.a2a = A2aSection(remotes={"echo": A2aRemoteConfig(**table)})
    return loaded


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai", "unscripted reply")


@pytest.fixture
async def runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    async with scripted_runtime(settings, db, scripted) as rt:
        yield rt


@pytest.fixture
async def sources(runtime: Runtime, served: RemoteAgent) -> AsyncIterator[RunningToolSources]:
    async with running_sources(runtime) as running:
        yield running


@pytest.fixture
def echo(sources: RunningToolSources) -> A2aRemoteSource:
    (found,) = [s for s in sources.attached if s.namespace == "a2a__echo"]
    assert isinstance(found, A2aRemoteSource)
    return found


@pytest.fixture
def agent(runtime: Runtime, sources: RunningToolSources) -> Agent:
    created = runtime.agents.create(AgentCreate(name="aki", prompt="You ask other agents."))
    runtime.agents.update(created.id, AgentUpdate(tool_ids=[tool_id(TOOL)]))
    return created


def done(result: TurnResult) -> ActionDone:
    (found,) = [a for a in result.actions if a.name == TOOL]
    return found


def read(result: TurnResult) -> dict[str, Any]:
    """What the model read of the turn's one call of the remote's tool."""
    answer: dict[str, Any] = json.loads(done(result).result.output())
    return answer


async def ask(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, **args: Any
) -> TurnResult:
    script(scripted, calls((TOOL, args)), speak("asked"))
    return await runtime.chat(agent, "ask the remote")


async def test_an_agent_asks_a_remote_agent_and_reads_its_reply(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    result = await ask(runtime, agent, scripted, message="echo hello crab")

    assert read(result) | {"context_id": "-"} == {
        "agent": "Echo crab",
        "state": "replied",
        "context_id": "-",
        "text": "echo: hello crab",
    }
    # the model was offered the card as the tool's description
    (tool,) = [t for t in scripted.requests[0].tools or [] if t.name == TOOL]
    assert "Ask the remote agent Echo crab (A2A)." in tool.description
    assert "Says things back, and works on slow jobs." in tool.description
    assert "- Echo: Repeats what it is told. (e.g. echo hello)" in tool.description
    assert "- Slow work: Works on a job" in tool.description
    assert tool.parameters["properties"].keys() == {"message", "task_id", "context_id"}
    # the remote's cost and latency are on the call's event
    [event] = [
        e
        for e in runtime.engine.events.trace(result.trace_id)
        if str(e.id) == done(result).result_event_id
    ]
    assert isinstance(event, ToolResultEvent)
    assert event.metadata["remote"] == "echo"
    assert event.metadata["cost_usd"] == 0.25
    assert isinstance(event.metadata["latency_ms"], int)
    assert event.metadata["latency_ms"] >= 0
    assert event.metadata["name"] == TOOL


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_working_task_is_handed_back_and_polled_until_it_completes(
    binding: str,
    remote: RemoteAgent,
    table: dict[str, Any],
    runtime: Runtime,
    agent: Agent,
    scripted: ScriptedProvider,
    echo: A2aRemoteSource,
) -> None:
    remote.binding = binding  # the card's first interface; the table asks for it
    runtime.settings.a2a.remotes["echo"].binding = binding  # type: ignore[assignment]
    echo.config = runtime.settings.a2a.remotes["echo"]
    echo.config.wait_secs = 0.2  # the task is held until `release`: it is still working
    await echo.refresh()

    first = read(await ask(runtime, agent, scripted, message="slow quarterly report"))
    assert first["state"] == "working"
    assert first["text"] == "on it"
    assert "call this tool again with this task_id" in first["next"]

    remote.release.set()
    echo.config.wait_secs = 30
    polled = await ask(runtime, agent, scripted, task_id=first["task_id"])
    answer = read(polled)
    assert answer["state"] == "completed"
    assert answer["task_id"] == first["task_id"]
    assert answer["text"] == "done: quarterly report"
    (artifact,) = answer["artifacts"]
    assert artifact["name"] == "report"
    (png,) = artifact["files"]
    assert png["media_type"] == "image/png"
    assert png["bytes"] == len(PNG)
    assert png["path"].startswith("a2a/echo/chart-")
    assert png["path"].endswith(".png")
    workspace = Workspace.for_agent(runtime.settings, str(agent.id))
    assert workspace.read_bytes(png["path"]) == PNG
    effects = done(polled).result.side_effects
    assert [(e.type, e.path) for e in effects] == [("file_written", png["path"])]


async def test_a_task_asking_for_input_is_answered_in_a_second_call(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    asked = read(await ask(runtime, agent, scripted, message="colour"))
    assert asked["state"] == "input-required"
    assert asked["text"] == "Which colour?"
    assert "answer by calling this tool again with this task_id" in asked["next"]

    answered = read(await ask(runtime, agent, scripted, message="blue", task_id=asked["task_id"]))
    assert answered["state"] == "completed"
    assert answered["text"] == "you chose blue"


async def test_a_failed_task_is_a_failed_call_with_the_remotes_words(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    result = done(await ask(runtime, agent, scripted, message="juggle"))
    assert not result.result.success
    assert result.result.error == "remote agent 'echo': the task is failed: no skill for that"


async def test_a_call_without_message_or_task_is_refused_saying_what_to_give(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    result = done(await ask(runtime, agent, scripted, context_id="c1"))
    assert not result.result.success
    assert "give a message (to send one) or a task_id" in (result.result.error or "")


async def test_an_unknown_task_is_a_clear_failure(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    result = done(await ask(runtime, agent, scripted, task_id="no-such-task"))
    assert not result.result.success
    assert "remote agent 'echo' (http://127.0.0.1:" in (result.result.error or "")
    assert "refused the call: TaskNotFoundError: Task not found" in (result.result.error or "")


async def test_the_card_is_read_again_and_its_new_description_offered(
    port: int, settings: Settings, db: Database, scripted: ScriptedProvider
) -> None:
    remote = RemoteAgent(port)  # its own: its card changes
    settings.a2a.remotes["echo"] = A2aRemoteConfig(
        url=remote.url, allow_private=True, refresh_secs=0.05
    )
    with serve_in_thread(remote.app(), port):
        async with (
            scripted_runtime(settings, db, scripted) as rt,
            running_sources(rt) as running,
        ):
            (echo,) = running.attached
            assert isinstance(echo, A2aRemoteSource)
            remote.card_description = "Now also paints."

            def painted() -> bool:
                definition = rt.registry.definitions([TOOL])
                return bool(definition) and "Now also paints." in definition[0].description

            await offered_when(echo, painted)
            assert echo.card_reads >= 2


async def test_the_ssrf_guard_refuses_a_loopback_remote_unless_allowed(
    runtime: Runtime, served: RemoteAgent
) -> None:
    runtime.settings.a2a = A2aSection(remotes={"echo": A2aRemoteConfig(url=served.url)})
    running = await start_tool_sources(runtime)
    try:
        reason = running.failed["a2a__echo"]
        assert "A2A remote 'echo'" in reason
        assert "refused to connect to 127.0.0.1: a loopback address" in reason
        assert "or set allow_private = true in [a2a.remotes.echo]" in reason
        assert TOOL not in runtime.registry.names()
    finally:
        await running.stop()

    runtime.settings.a2a = A2aSection(
        remotes={"echo": A2aRemoteConfig(url=served.url, allow_private=True)}
    )
    running = await start_tool_sources(runtime)
    try:
        assert running.failed == {}
        assert TOOL in runtime.registry.names()
    finally:
        await running.stop()


async def test_the_guard_covers_the_interfaces_the_card_names(
    runtime: Runtime, remote: RemoteAgent, scripted: ScriptedProvider
) -> None:
    """The card's own address is allow-listed; the interface it names is not: refused."""
    remote.interface_url = f"http://127.0.0.2:{remote.port}"
    runtime.settings.tools.http_allow_networks = ["127.0.0.1/32"]
    runtime.settings.a2a = A2aSection(remotes={"echo": A2aRemoteConfig(url=remote.url)})
    running = await start_tool_sources(runtime)
    try:
        assert running.failed == {}  # the card was read
        agent = runtime.agents.create(AgentCreate(name="aki", prompt="You ask other agents."))
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(TOOL)]))
        call = done(await ask(runtime, agent, scripted, message="echo hi"))
        assert not call.result.success
        error = call.result.error or ""
        assert "refused to connect to 127.0.0.2: a loopback address" in error
        assert "or set allow_private = true in [a2a.remotes.echo]" in error
    finally:
        await running.stop()


async def test_a_hanging_remote_is_cut_by_the_turns_deadline(
    runtime: Runtime,
    agent: Agent,
    remote: RemoteAgent,
    scripted: ScriptedProvider,
    echo: A2aRemoteSource,
) -> None:
    # the remote never answers; wait_secs (30) is longer than the turn may run
    runtime.settings.agent.turn_timeout_secs = 3.0
    result = await ask(runtime, agent, scripted, message="hang")
    assert remote.hanging == 1  # it reached the remote, which still holds it
    call = done(result)
    assert not call.result.success
    assert "was cut off by the turn's deadline ([agent] turn_timeout_secs)" in (
        call.result.error or ""
    )
    assert result.error is not None
    assert "turn_timeout_secs" in result.error.message


async def test_a_remote_that_went_down_is_a_clear_tool_error(
    port: int, runtime: Runtime, scripted: ScriptedProvider
) -> None:
    remote = RemoteAgent(port)  # its own: it goes down
    runtime.settings.a2a = A2aSection(
        remotes={"echo": A2aRemoteConfig(url=remote.url, allow_private=True)}
    )
    with serve_in_thread(remote.app(), port):
        running = await start_tool_sources(runtime)
    try:
        (echo,) = running.started
        assert isinstance(echo, A2aRemoteSource)
        agent = runtime.agents.create(AgentCreate(name="aki", prompt="You ask other agents."))
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(TOOL)]))
        result = await ask(runtime, agent, scripted, message="echo anyone?")
        call = done(result)
        assert not call.result.success
        error = call.result.error or ""
        assert error.startswith(f"remote agent 'echo' ({remote.url}) could not be reached")
        assert "ConnectError" in error or "connect" in error.lower()
        assert result.stopped_by == "send_speech"  # the turn went on
        # the failure had the card read again; it cannot be, and says so (a failed read
        # offers nothing new: wait for the state itself)
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            while echo.state != "failed":
                await asyncio.sleep(0.01)
        assert echo.last_error is not None
    finally:
        await running.stop()


async def test_a_remote_not_granted_is_not_offered_nor_callable(
    runtime: Runtime, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    other = runtime.agents.create(AgentCreate(name="mio", prompt="You have no remote."))
    script(scripted, calls((TOOL, {"message": "echo hi"})), speak("ok"))
    result = await runtime.chat(other, "try it")
    offered = {t.name for t in scripted.requests[0].tools or []}
    assert TOOL not in offered
    call = done(result)
    assert not call.result.success
    assert f"you may not call '{TOOL}'" in (call.result.error or "")


@pytest.mark.parametrize("how", ["env", "encrypted"])
async def test_the_bearer_token_is_sent_from_the_variable_or_encrypted(
    how: str,
    remote: RemoteAgent,
    served: RemoteAgent,
    runtime: Runtime,
    scripted: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if how == "env":
        monkeypatch.setenv("ECHO_TOKEN", "t0ken")
        table = A2aRemoteConfig(url=served.url, allow_private=True, token_env="ECHO_TOKEN")
    else:
        box = SecretBox.load(Path(runtime.settings.data_dir), create=True)
        table = A2aRemoteConfig(
            url=served.url, allow_private=True, token_encrypted=box.encrypt("t0ken")
        )
    runtime.settings.a2a = A2aSection(remotes={"echo": table})
    running = await start_tool_sources(runtime)
    try:
        agent = runtime.agents.create(AgentCreate(name="aki", prompt="You ask other agents."))
        runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id(TOOL)]))
        assert read(await ask(runtime, agent, scripted, message="echo hi"))["text"] == "echo: hi"
        assert remote.authorizations
        assert set(remote.authorizations) == {"Bearer t0ken"}  # the card's read too
    finally:
        await running.stop()


async def test_a_token_variable_not_set_is_named(runtime: Runtime, served: RemoteAgent) -> None:
    table = A2aRemoteConfig(url=served.url, allow_private=True, token_env="ABSENT_TOKEN")
    runtime.settings.a2a = A2aSection(remotes={"echo": table})
    running = await start_tool_sources(runtime)
    try:
        assert "token_env names ABSENT_TOKEN, which is not set" in running.failed["a2a__echo"]
    finally:
        await running.stop()


def test_a_table_is_checked() -> None:
    with pytest.raises(ValueError, match="set token_env or token_encrypted, not both"):
        A2aRemoteConfig(url="https://a.example", token_env="A", token_encrypted="x")
    with pytest.raises(ValueError, match="no variable name"):
        A2aRemoteConfig(url="https://a.example", token_env="1A")
    with pytest.raises(ValueError, match="url"):
        A2aRemoteConfig(url="ftp://a.example")
    with pytest.raises(ValueError, match="it becomes the tool namespace a2a__<name>"):
        A2aSection.model_validate({"remotes": {"a__b": {"url": "https://a.example"}}})


async def test_the_unsafe_policy_holds_a_call_until_a_person_approves_it(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, echo: A2aRemoteSource
) -> None:
    policies = {TOOL: "unsafe"}  # a remote agent may change anything: it is held
    save_tool_settings(runtime.db, agent.id, ToolSettings(approvals=policies))  # type: ignore[arg-type]
    script(scripted, calls((TOOL, {"message": "echo approved"})))
    held = await runtime.turns.chat(agent, "ask it")
    assert held.stopped_by == "approval"
    assert held.approval_id is not None
    assert not held.actions  # nothing was sent

    decided = await runtime.approvals.decide(held.approval_id, approve=True, by="ops")
    [event] = [
        e
        for e in runtime.engine.events.trace(held.trace_id)
        if str(e.id) == decided.result_event_id
    ]
    assert isinstance(event, ToolResultEvent)
    assert json.loads(event.content.output)["text"] == "echo: approved"
    assert event.metadata["cost_usd"] == 0.25
    assert event.metadata["remote"] == "echo"
