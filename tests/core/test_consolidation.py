"""Seed 001's learning loop at the end of a session (core/consolidation.py), against the
fake OpenAI server on SQLite and PostgreSQL: an ended session (idle, or ended through
the API's end_session) is summarised once into curated memories (duplicates merged),
impressions and a summary line, its cost a metrics row of purpose analysis; two
processes never summarise one session twice; a failed call is recorded, not retried."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.consolidation import Consolidator
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import end_session, ensure_chat_session
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.lease_owners import process_owner
from opencrab.store.leases import LeaseStore
from opencrab.store.repositories.consolidation import consolidations
from opencrab.store.tables import llm_usage_metrics, memory_sessions
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

CHAT = "/v1/chat/completions"
USAGE = {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020}


@pytest.fixture
def live_settings(
    data_dir: Any, fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    monkeypatch.setenv("OPENCRAB_LLM__DEFAULT_PROVIDER", "openai")
    monkeypatch.setenv("OPENCRAB_LLM__DEFAULT_MODEL", "gpt-5-mini")
    return load_settings()


@asynccontextmanager
async def opened(settings: Settings, db: Database) -> AsyncIterator[Runtime]:
    recorder = MetricsRecorder(db)
    router = LlmRouter.from_settings(settings, metrics=recorder)
    async with Runtime.open(settings, db=db, router=router) as rt:
        yield rt
    await recorder.aclose()


@pytest.fixture
async def live(live_settings: Settings, any_db: Database) -> AsyncIterator[Runtime]:
    async with opened(live_settings, any_db) as rt:
        yield rt


def answer(server: FakeLlmServer, content: dict[str, Any] | str, **reply: Any) -> None:
    """Every chat call from now on gets `content` as the model's answer."""
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    body = completion({"content": text}, usage=USAGE)
    server.respond(CHAT, lambda _: Reply(json=body, **reply))


def chat_lines(runtime: Runtime, agent: Agent, session: str, *lines: tuple[str, str]) -> None:
    MemoryManager(runtime.db, agent.id).append_session_logs(
        [
            SessionLog(session_id=session, log_type="speech", content=text, speaker_id=who)
            for who, text in lines
        ]
    )


def age(db: Database, session: str, hours: float) -> None:
    """Make the session's lines `hours` old."""
    with db.write() as conn:
        conn.execute(
            memory_sessions.update()
            .where(memory_sessions.c.session_id == session)
            .values(created_at=datetime.now(UTC) - timedelta(hours=hours))
        )


SUMMARY = {
    "summary": "Yui talked about her cat Tama; we agreed to meet on Friday.",
    "memories": [
        {"category": "facts", "content": "Yui's cat is called Tama."},
        {"category": "no such category", "content": "Yui prefers green tea"},
        {"category": "preferences", "content": "the user likes SHORT answers!"},
        {"category": "facts", "content": "   "},
        "not an object",
    ],
    "impressions": [
        {"target_id": "yui", "target_name": "Yui", "personality": "warm", "notes": "has a cat"},
        {"target_id": "someone-else", "target_name": "Mallory", "personality": "made up"},
    ],
}


async def metric_rows(runtime: Runtime) -> list[Any]:
    assert runtime.router.metrics is not None
    await runtime.router.metrics.flush()
    with runtime.db.read() as conn:
        return conn.execute(sa.select(llm_usage_metrics)).all()


async def test_an_idle_session_is_summarised_once_into_memories_and_impressions(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    aki = live.agents.create(AgentCreate(name="aki", prompt="p"))
    memory = MemoryManager(live.db, aki.id)
    kept = memory.save_curated("preferences", "The user likes short answers.")
    session = ensure_chat_session(live.db, aki.id)
    chat_lines(
        live,
        aki,
        session,
        ("yui", "My cat is called Tama"),
        (aki.id, "What a lovely name"),
        ("yui", "Let's meet on Friday"),
    )
    consolidator = Consolidator(live)
    assert await consolidator.sweep() == []  # the session is not idle yet: nothing asked
    assert fake_llm_server.requests_to(CHAT) == []

    age(live.db, session, hours=1)
    answer(fake_llm_server, SUMMARY)
    [outcome] = await consolidator.sweep()
    assert (outcome.status, outcome.lines, outcome.merged, outcome.impressions) == (
        "done",
        3,
        1,
        1,
    )
    [request] = fake_llm_server.requests_to(CHAT)
    sent = request.json
    assert sent["model"] == "gpt-5-mini"
    assert "tools" not in sent
    prompt = sent["messages"][-1]["content"]
    assert "My cat is called Tama" in prompt
    assert "The user likes short answers." in prompt  # what is kept already is shown

    curated = {(m.category, m.content): m for m in memory.list_curated()}
    assert set(curated) == {
        ("facts", "Yui's cat is called Tama."),
        ("facts", "Yui prefers green tea"),
        ("preferences", "The user likes short answers."),  # merged: the older text kept
    }
    merged = curated[("preferences", "The user likes short answers.")]
    assert (merged.id, merged.times_seen, merged.created_at) == (kept.id, 2, kept.created_at)
    assert merged.updated_at > kept.updated_at
    [impression] = memory.impressions(session)
    assert (impression.target_id, impression.personality, impression.notes) == (
        "yui",
        "warm",
        "has a cat",
    )
    # the summary is a line of the session: searchable, with its time
    [line] = memory.search("agreed to meet on Friday")
    assert (line.log_type, line.session_id) == ("system", session)
    assert line.metadata == {"consolidation": True, "lines": 3}

    # its cost is a metrics row like every call's
    [row] = await metric_rows(live)
    assert (row.purpose, row.task_type, row.agent_id, row.session_id) == (
        "analysis",
        "consolidation",
        aki.id,
        session,
    )
    assert row.input_tokens == 900
    assert row.estimated_cost_usd > 0  # priced like every call

    [done] = consolidations(live.db, aki.id)
    assert (done.status, done.memories, done.merged, done.impressions) == ("done", 3, 1, 1)

    # done once: the summary line does not make it new again, and a later sweep asks nothing
    assert await consolidator.sweep() == []
    assert len(fake_llm_server.requests_to(CHAT)) == 1

    # new lines later: consolidated again, those lines only, once idle
    chat_lines(live, aki, session, ("yui", "Actually Tama is a dog"))
    later = datetime.now(UTC) + timedelta(hours=1)
    answer(fake_llm_server, {"summary": "", "memories": [], "impressions": []})
    [again] = await consolidator.sweep(now=later)
    assert (again.status, again.lines) == ("empty", 1)
    prompt = fake_llm_server.requests_to(CHAT)[-1].json["messages"][-1]["content"]
    assert "Actually Tama is a dog" in prompt
    assert "My cat is called Tama" not in prompt
    assert await consolidator.sweep(now=later) == []


async def test_a_session_ended_through_the_api_is_summarised_without_waiting(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    aki = live.agents.create(AgentCreate(name="aki", prompt="p", language="ja"))
    ended = ensure_chat_session(live.db, aki.id)
    active = ensure_chat_session(live.db, aki.id, "33333333-3333-4333-8333-333333333333")
    chat_lines(live, aki, ended, ("yui", "猫の名前はタマです"))
    chat_lines(live, aki, active, ("yui", "まだ話している"))
    end_session(live.db, ended)
    answer(
        fake_llm_server,
        "```json\n"
        + json.dumps(
            {
                "summary": "ユイの猫はタマ",
                "memories": [{"category": "facts", "content": "ユイの猫はタマ"}],
            },
            ensure_ascii=False,
        )
        + "\n```",
    )
    outcomes = await Consolidator(live).sweep()
    assert [(o.session_id, o.status) for o in outcomes] == [(ended, "done")]
    system = fake_llm_server.requests_to(CHAT)[0].json["messages"][0]["content"]
    assert "セッションが終わりました" in system  # the agent's language
    assert '{"summary": str' in system  # literal braces, not the template's doubled ones
    assert [m.content for m in MemoryManager(live.db, aki.id).list_curated()] == ["ユイの猫はタマ"]


async def test_old_history_is_left_alone(live: Runtime, fake_llm_server: FakeLlmServer) -> None:
    aki = live.agents.create(AgentCreate(name="aki", prompt="p"))
    session = ensure_chat_session(live.db, aki.id)
    chat_lines(live, aki, session, ("yui", "an imported line from last year"))
    age(live.db, session, hours=24 * 365)
    assert await Consolidator(live).sweep() == []
    assert fake_llm_server.requests_to(CHAT) == []


async def test_a_failed_call_is_recorded_and_not_retried_until_new_lines(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    aki = live.agents.create(AgentCreate(name="aki", prompt="p"))
    session = ensure_chat_session(live.db, aki.id)
    chat_lines(live, aki, session, ("yui", "hello"))
    age(live.db, session, hours=1)
    refused = Reply(status=401, json={"error": {"message": "bad key", "type": "auth"}})
    fake_llm_server.respond(CHAT, lambda _: refused)
    consolidator = Consolidator(live)
    [outcome] = await consolidator.sweep()
    assert outcome.status == "failed"
    assert outcome.error
    [row] = consolidations(live.db, aki.id)
    assert row.status == "failed"
    assert row.detail["error"] == outcome.error
    assert await consolidator.sweep() == []
    assert len(fake_llm_server.requests_to(CHAT)) == 1
    assert MemoryManager(live.db, aki.id).list_curated() == []

    # an answer that is no JSON object stores nothing and says so
    chat_lines(live, aki, session, ("yui", "again"))
    age(live.db, session, hours=1)
    answer(fake_llm_server, "I would rather not.")
    [outcome] = await consolidator.sweep()
    assert (outcome.status, outcome.error) == ("failed", "the model gave no JSON object")


def other_process(runtime: Runtime) -> Consolidator:
    """A consolidator as another process would run it: its own lease owner."""
    keeper = LeaseKeeper(LeaseStore(runtime.db), owner=process_owner(), ttl_secs=30)
    return Consolidator(runtime, leases=keeper)


async def test_two_processes_never_summarise_one_session_twice(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    aki = live.agents.create(AgentCreate(name="aki", prompt="p"))
    session = ensure_chat_session(live.db, aki.id)
    chat_lines(live, aki, session, ("yui", "My cat is called Tama"))
    age(live.db, session, hours=1)
    first, second = other_process(live), other_process(live)
    gate = threading.Event()
    answer(fake_llm_server, SUMMARY, gate=gate)
    running = asyncio.create_task(first.sweep())
    for _ in range(600):  # the first is in its model call, holding the session's lease
        if fake_llm_server.requests_to(CHAT):
            break
        await asyncio.sleep(0.05)
    assert len(fake_llm_server.requests_to(CHAT)) == 1
    assert await second.sweep() == []  # the lease is held: it leaves the session alone
    gate.set()
    [outcome] = await running
    assert outcome.status == "done"
    assert await second.sweep() == []  # done meanwhile: nothing new
    # both at once, on a session with new lines: still one call
    chat_lines(live, aki, session, ("yui", "One more thing"))
    age(live.db, session, hours=1)
    answer(fake_llm_server, {"summary": "one more", "memories": [], "impressions": []})
    together = await asyncio.gather(first.sweep(), second.sweep())
    assert sorted(len(done) for done in together) == [0, 1]
    assert len(fake_llm_server.requests_to(CHAT)) == 2
    rows = [r for r in await metric_rows(live) if r.task_type == "consolidation"]
    assert len(rows) == 2
    [row] = consolidations(live.db, aki.id)
    assert row.detail["summary"] == "one more"
