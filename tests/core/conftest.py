"""Engine fixtures: a runtime whose router answers with a ScriptedProvider named "openai"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import count
from typing import Any
from uuid import UUID

import pytest

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate, HeartbeatConfig, SessionHome
from opencrab.core.heartbeat import HeartbeatScheduler, heartbeat_scheduler, pulse_for
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.types import ChatResponse, ToolCall
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.scripted_runtime import scripted_runtime

_ids = count(1)


def calls(*pairs: tuple[str, Any], text: str = "") -> ChatResponse:
    """A reply calling actions: ("ws_write", {...}); a str argument is sent as raw JSON."""
    tool_calls = []
    for name, arguments in pairs:
        call_id = f"call_{next(_ids)}"
        if isinstance(arguments, str):
            tool_calls.append(
                ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=arguments)
            )
        else:
            tool_calls.append(
                ToolCall(
                    id=call_id,
                    name=name,
                    arguments=arguments,
                    raw_arguments=json.dumps(arguments, ensure_ascii=False),
                )
            )
    return reply(text, tool_calls=tool_calls)


def speak(text: str) -> ChatResponse:
    return calls(("send_speech", {"content": text}))


def homed(runtime: Runtime, name: str) -> tuple[Agent, str, HeartbeatScheduler]:
    """A new agent `name` whose heartbeat home is a chat session of its own, and a
    heartbeat scheduler pulsing it (tick it by hand): the agent, the session's id and the
    scheduler."""
    agent = runtime.agents.create(AgentCreate(name=name))
    session_id = ensure_chat_session(runtime.db, agent.id)
    home = SessionHome(gateway="session", session_id=UUID(session_id), every_secs=600)
    agent = runtime.agents.update(agent.id, AgentUpdate(heartbeat=HeartbeatConfig(home=home)))
    scheduler = heartbeat_scheduler(runtime)
    scheduler.add(pulse_for(runtime, agent, scheduler))
    return agent, session_id, scheduler


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
def agent(runtime: Runtime) -> Agent:
    """An agent speaking ja, so its context is seed 001's text, which tests quote."""
    return runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes.", language="ja"))
