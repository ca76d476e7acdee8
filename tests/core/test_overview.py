"""The agents' overview (home cards, GET /api/agent-overview): the `error` status."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate
from opencrab.core.overview import agent_overview
from opencrab.core.runtime import Runtime
from opencrab.errors import LlmError, ProviderBadRequest
from opencrab.llm.types import ChatResponse
from opencrab.store import Database
from tests.core.conftest import speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.scripted_runtime import scripted_runtime


@pytest.fixture
async def runtime_on_both(
    settings: Settings, any_db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """A runtime on SQLite and on PostgreSQL, thinking through `scripted`."""
    async with scripted_runtime(settings, any_db, scripted) as rt:
        yield rt


async def test_an_agent_whose_latest_turn_failed_shows_error_until_a_reply(
    runtime_on_both: Runtime, scripted: ScriptedProvider
) -> None:
    runtime = runtime_on_both
    kai = runtime.agents.create(AgentCreate(name="kai", prompt="Be brief."))
    ren = runtime.agents.create(AgentCreate(name="ren", prompt="Be brief."))

    async def status() -> dict[str, str]:
        return {c.name: c.status for c in await agent_overview(runtime, None)}

    def script(outcome: ChatResponse | LlmError) -> None:
        scripted.outcomes.clear()  # the last outcome repeats: only this one
        scripted.then(outcome)

    script(speak("fine"))
    await runtime.chat(ren, "hello")
    assert await status() == {"kai": "idle", "ren": "idle"}

    script(ProviderBadRequest("the model refused the request", provider="openai"))
    failed = await runtime.chat(kai, "hello")
    assert failed.error is not None
    assert await status() == {"kai": "error", "ren": "idle"}
    [card] = await agent_overview(runtime, None, agent_id="kai")
    assert card.status == "error"

    script(speak("working again"))
    await runtime.chat(kai, "again", session_id=failed.session_id)
    assert await status() == {"kai": "idle", "ren": "idle"}
