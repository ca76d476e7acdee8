"""The memory eval (core/memory_eval.py) on SQLite and PostgreSQL: the built-in keyword
questions, the analysis model's questions through the fake OpenAI server (its cost a
metrics row), search legs plugged in by name and scored against the same questions."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.core import memory_eval
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_eval import (
    builtin_questions,
    candidates,
    evaluate,
    lexical_leg,
    register_leg,
    runs,
)
from opencrab.core.runtime import Runtime
from opencrab.errors import ValidationError
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from opencrab.store.repositories.memory_evals import eval_pool
from opencrab.store.tables import llm_usage_metrics
from tests.fakes.llm_server import FakeLlmServer, Recorded, Reply
from tests.fakes.openai_bodies import completion

CHAT = "/v1/chat/completions"
LINES = [
    "The user's cat is called Tama and she likes tuna",
    "We decided to ship the beta release on Friday",
    "ユーザーの猫の名前はタマで、マグロが好き",
    "Deploy the staging server after the database migration",
    "The quarterly budget review moved to Thursday afternoon",
    "東京の天気は明日雨の予報です",
    "Remember to water the tomato plants every morning",
    "The printer on the third floor needs new toner cartridges",
    "Yui prefers green tea over coffee in the afternoon",
    "来週の会議は大阪支社で開かれる",
    "The user's cat is called Tama and she likes tuna",  # said twice: either line answers
    "ok",  # too short to ask about
]


@pytest.fixture
def live_settings(
    data_dir: Any, fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    monkeypatch.setenv("OPENCRAB_LLM__DEFAULT_PROVIDER", "openai")
    return load_settings()


@pytest.fixture
async def live(live_settings: Settings, any_db: Database) -> AsyncIterator[Runtime]:
    recorder = MetricsRecorder(any_db)
    router = LlmRouter.from_settings(live_settings, metrics=recorder)
    async with Runtime.open(live_settings, db=any_db, router=router) as rt:
        yield rt
    await recorder.aclose()


def agent_with_lines(runtime: Runtime) -> Agent:
    aki = runtime.agents.create(AgentCreate(name="aki", prompt="p"))
    session = str(uuid4())
    MemoryManager(runtime.db, aki.id).append_session_logs(
        [SessionLog(session_id=session, log_type="speech", content=t) for t in LINES]
    )
    return aki


def test_keywords_are_rare_words_and_cjk_pieces() -> None:
    assert candidates("The user's cat is called Tama!") == ["user's", "cat", "called", "tama"]
    # 3-character pieces (what the trigram index finds) with at most one hiragana
    pieces = ["猫の名", "の名前", "名前は", "前はタ", "はタマ", "タマで"]
    assert candidates("猫の名前はタマです") == pieces
    assert candidates("Tama は caté が好き") == ["tama", "caté"]


async def test_builtin_questions_are_deterministic_and_answered_by_any_same_line(
    live: Runtime,
) -> None:
    aki = agent_with_lines(live)
    pool = eval_pool(live.db, aki.id, limit=100)
    assert "ok" not in [line.content for line in pool]
    first = builtin_questions(pool, pool, seed=3)
    assert first == builtin_questions(pool, pool, seed=3)
    assert first != builtin_questions(pool, pool, seed=4)  # another draw, other shuffles
    tama = [q for q in first if q.line_id == pool[0].id]
    [question] = tama
    assert question.relevant == {pool[0].id, pool[-1].id}  # the twin line answers too
    for q in first:  # each keyword is in its line
        line = next(line for line in pool if line.id == q.line_id)
        assert all(word in line.content.lower() for word in q.query.split())


async def test_a_leg_plugs_in_by_name_and_is_scored_like_the_others(
    live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    aki = agent_with_lines(live)
    monkeypatch.setattr(memory_eval, "_LEGS", dict(memory_eval._LEGS))
    monkeypatch.setattr(memory_eval, "_AVAILABLE", dict(memory_eval._AVAILABLE))

    def backwards(memory: MemoryManager, query: str, k: int) -> list[int]:
        """A poor leg: the newest lines, whatever the query."""
        return [line.id for line in reversed(memory.recent_logs(limit=k))]

    register_leg("vector", backwards)
    with pytest.raises(ValidationError, match="search leg name"):
        register_leg("Vector Leg!", backwards)
    run = await evaluate(live.db, aki, generator="builtin", router=None)
    assert run.generator == "builtin"
    assert run.questions == 10  # one per distinct line of 8+ characters
    assert list(run.legs) == ["lexical", "vector", "hybrid"]
    assert run.legs["lexical"]["recall@10"] == 1.0
    assert run.legs["vector"]["available"] is True
    assert run.legs["vector"]["mrr"] < run.legs["lexical"]["mrr"]
    # the built-in hybrid leg needs vectors, which this agent has none of yet
    assert run.legs["hybrid"] == {
        "available": False,
        "note": "this agent's memory has no vectors yet",
    }
    assert [r.id for r in runs(live.db, aki.id)] == [run.id]
    # a leg's own name is shown too
    register_leg("lexical-copy", lexical_leg)
    again = await evaluate(live.db, aki, generator="builtin", router=None, store=False)
    assert again.legs["lexical-copy"]["recall@5"] == again.legs["lexical"]["recall@5"]
    assert len(runs(live.db, aki.id)) == 1


def paraphrase(request: Recorded) -> Reply:
    """The fake analysis model: for each numbered line, a question of its longest word
    and the word "what", so a search needing every word misses the lines."""
    text = request.json["messages"][-1]["content"]
    lines = re.findall(r"^\d+\. (.*)$", text, flags=re.MULTILINE)
    asked = [f"what {max(line.split(), key=len)}" for line in lines]
    body = {"questions": asked}
    return Reply(json=completion({"content": json.dumps(body, ensure_ascii=False)}))


async def test_the_analysis_models_questions_are_used_when_configured(
    live: Runtime, fake_llm_server: FakeLlmServer
) -> None:
    aki = agent_with_lines(live)
    fake_llm_server.respond(CHAT, paraphrase)
    run = await evaluate(live.db, aki, questions=9, router=live.router, model="")
    assert run.generator == "model"
    assert run.questions == 9
    requests = fake_llm_server.requests_to(CHAT)
    assert len(requests) == 2  # batches of eight
    assert "one question per line" in requests[0].json["messages"][0]["content"]
    # "what" is in no line: the full-text leg, needing every word, finds none of them
    assert run.legs["lexical"]["recall@10"] == 0.0
    assert live.router.metrics is not None
    await live.router.metrics.flush()
    with live.db.read() as conn:
        rows = conn.execute(sa.select(llm_usage_metrics)).all()
    assert {(r.purpose, r.task_type, r.agent_id) for r in rows} == {
        ("analysis", "memory_eval", aki.id)
    }

    # auto falls back to the built-in questions when the call fails
    fake_llm_server.respond(CHAT, lambda _: Reply(status=401, json={"error": {"message": "no"}}))
    fallback = await evaluate(live.db, aki, questions=3, router=live.router)
    assert fallback.generator == "builtin"
    with pytest.raises(Exception, match="no"):
        await evaluate(live.db, aki, questions=3, router=live.router, generator="model")


async def test_no_lines_no_questions(live: Runtime) -> None:
    empty = live.agents.create(AgentCreate(name="empty", prompt="p"))
    with pytest.raises(ValidationError, match="no memory lines"):
        await evaluate(live.db, empty, router=None)
    with pytest.raises(ValidationError, match="1 to 1000"):
        await evaluate(live.db, empty, questions=0)
