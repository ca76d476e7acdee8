"""A real turn with the embedded SmolLM2-135M: whatever it says, the turn completes and is
recorded (the offline default when no provider is configured); a fresh (en) agent answers
an English greeting in English without echoing its system prompt."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator

import pytest

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate
from opencrab.core.memory import MemoryManager
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.core.steps import TurnResult
from opencrab.event_log import EventLog
from opencrab.llm.providers.embedded import EmbeddedProvider
from opencrab.llm.types import ChatChunk, ChatRequest
from opencrab.messages import CliSource, IncomingMessage
from opencrab.store import Database
from tests.fakes.ports import closed_port


@pytest.fixture(autouse=True)
def no_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", url)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", url)


async def test_smollm2_completes_a_recorded_turn(db: Database) -> None:
    settings: Settings = load_settings()  # the env above is read now
    async with Runtime.open(settings, db=db) as runtime:
        assert runtime.router.offline
        assert str(runtime.router.default) == "embedded/smollm2-135m-instruct"
        agent = runtime.agents.create(AgentCreate(name="tiny", prompt="Answer briefly."))
        session = "0b5c9b4e-2d1c-4c36-9d57-3c9f3a6f4a01"
        ensure_chat_session(runtime.db, agent.id, session)
        message = IncomingMessage.text("Hello! Who are you?", source=CliSource(session_id=session))
        result: TurnResult | None = None
        async for step in runtime.engine.run(agent, message, session_id=session, max_tokens=32):
            if isinstance(step, TurnResult):
                result = step
    assert result is not None
    assert result.error is None
    assert result.stopped_by == "message"
    assert isinstance(result.reply, str)
    events = EventLog(db).trace(session)
    assert [e.type for e in events] == ["user", "message", "token_usage"]
    usage = events[2]
    assert usage.metadata is not None
    assert usage.metadata["provider"] == "embedded"
    logs = MemoryManager(db, agent.id).session_logs(session)
    assert [log.log_type for log in logs] == ["speech", "speech"]
    assert logs[-1].content == result.reply


class RecordingEmbedded(EmbeddedProvider):
    """The real embedded provider, keeping the requests it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ChatRequest] = []

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.requests.append(request)
        async for chunk in super().chat_completion_stream(request):
            yield chunk


GREETING = "Hello! Please note that Tokyo is sunny today."


async def test_a_fresh_agent_answers_an_english_greeting_in_english(db: Database) -> None:
    settings: Settings = load_settings()
    async with Runtime.open(settings, db=db) as runtime:
        assert runtime.router.offline
        await runtime.router.providers["embedded"].aclose()
        recording = RecordingEmbedded()
        runtime.router.register_provider(recording)
        agent = runtime.agents.create(AgentCreate(name="tiny"))
        result = await runtime.chat(agent, GREETING)
    assert agent.language == "en"
    assert (result.error, result.stopped_by) == (None, "message")
    reply = result.reply or ""
    letters = [c for c in reply if c.isalpha()]
    latin = [c for c in letters if unicodedata.name(c, "").startswith("LATIN")]
    assert len(letters) >= 10, reply
    assert len(latin) >= 0.9 * len(letters), reply  # English, not Japanese
    assert reply.strip() != GREETING
    [request] = recording.requests
    system = request.messages[0]
    assert system.role == "system"
    lines = [line.strip() for line in system.text.splitlines() if line.strip()]
    assert lines
    assert [line for line in lines if line in reply] == [], reply
