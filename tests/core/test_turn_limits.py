"""A turn's overall deadline ([agent] turn_timeout_secs) and empty model replies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ProviderConfig
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.event_log import EventLog
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.scripted_provider import ScriptedProvider

CHAT = "/v1/chat/completions"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One chat.completion.chunk of OpenAI's stream."""
    return {
        "id": "chatcmpl-drip",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-drip",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@pytest.fixture
async def wired(
    settings: Settings, db: Database, fake_llm_server: FakeLlmServer
) -> AsyncIterator[tuple[Runtime, Agent]]:
    """A runtime whose "openai" provider is the real one, talking to the fake server."""
    settings.agent.turn_timeout_secs = 1
    provider = OpenAIProvider(
        ProviderConfig(api_key=SecretStr("sk-test"), base_url=fake_llm_server.url + "/v1"),
        name="openai",
    )
    router = LlmRouter(settings)
    router.register_provider(provider)
    async with Runtime.open(settings, db=db, router=router) as runtime:
        yield runtime, runtime.agents.create(AgentCreate(name="aki", prompt="Be brief."))
    await provider.aclose()


async def test_a_stream_that_drips_past_the_deadline_ends_the_turn_with_a_timeout(
    wired: tuple[Runtime, Agent], fake_llm_server: FakeLlmServer, db: Database
) -> None:
    runtime, agent = wired
    # every piece arrives well within the provider's read timeout; the whole takes 20 s
    pieces: list[Any] = [chunk({"content": "drip "})] * 400
    drip = Reply(sse=[*pieces, chunk({}, "stop"), "[DONE]"], event_delay=0.05)
    fine = Reply(sse=[chunk({"content": "Hello."}), chunk({}, "stop"), "[DONE]"])
    fake_llm_server.reply(CHAT, drip, fine)

    result = await runtime.chat(agent, "Tell me everything", stream=True)

    assert result.stopped_by == "turn_timeout"
    assert result.error is not None
    assert result.error.error == "turn_timeout"
    assert "turn_timeout_secs" in result.error.message
    events = EventLog(db).trace(result.trace_id)
    failed = events[-1]
    assert failed.type == "message"
    assert failed.metadata == {"kind": "error", "error": "turn_timeout"}

    # the session goes on: the next turn continues the same chain
    again = await runtime.chat(agent, "Short, please", session_id=result.session_id, stream=True)
    assert (again.reply, again.error) == ("Hello.", None)
    after = EventLog(db).trace(result.trace_id)
    assert after[len(events)].type == "user"
    assert after[len(events)].parent_id == failed.id


async def test_a_call_that_answers_past_the_deadline_ends_the_turn_with_a_timeout(
    wired: tuple[Runtime, Agent], fake_llm_server: FakeLlmServer, db: Database
) -> None:
    runtime, agent = wired
    late = {
        "id": "chatcmpl-late",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-late",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Late."},
                "finish_reason": "stop",
            }
        ],
    }
    fake_llm_server.reply(CHAT, Reply(delay=20, json=late))  # within the provider's timeout
    result = await runtime.chat(agent, "hello?")
    assert result.stopped_by == "turn_timeout"
    assert result.reply is None
    assert EventLog(db).trace(result.trace_id)[-1].metadata == {
        "kind": "error",
        "error": "turn_timeout",
    }


async def test_an_empty_reply_is_an_error_not_a_message(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, db: Database
) -> None:
    scripted.outcomes.clear()
    scripted.then("")
    result = await runtime.chat(agent, "hi")
    assert result.reply is None
    assert result.stopped_by == "empty_reply"
    assert result.error is not None
    assert "empty reply" in result.error.message
    events = EventLog(db).trace(result.trace_id)
    assert [e.type for e in events] == ["user", "message", "token_usage"]
    assert events[1].metadata == {"kind": "error", "error": "empty_reply"}
