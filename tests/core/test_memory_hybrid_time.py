"""The hybrid memory search and the time a query names, together (issues 35's retrieval
and consolidation branches merged), on real SQLite and PostgreSQL with the packaged
embedder: both legs search the span, each hit keeps its legs and its time; and the eval
scores the retrieval's own vector and hybrid legs once the agent's lines are embedded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.core import memory_eval
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_index import MemoryIndexer
from opencrab.store import Database
from opencrab.store.tables import memory_sessions

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
YESTERDAY = "11111111-1111-4111-8111-111111111111"
EARLIER = "22222222-2222-4222-8222-222222222222"


def dated(db: Database, memory: MemoryManager, session: str, when: datetime, *lines: str) -> None:
    memory.append_session_logs(
        [SessionLog(session_id=session, log_type="speech", content=t) for t in lines]
    )
    with db.write() as conn:
        conn.execute(
            sa.update(memory_sessions)
            .where(memory_sessions.c.session_id == session)
            .values(created_at=when)
        )


@pytest.fixture
def memory(any_db: Database, settings: Settings) -> MemoryManager:
    agent = AgentStore(any_db, settings).create(AgentCreate(name="a"))
    memory = MemoryManager(any_db, agent.id)
    dated(
        any_db,
        memory,
        YESTERDAY,
        NOW - timedelta(days=1),
        "the user's cat is called Tama",
        "we deployed the server on friday evening",
        "lunch was ramen at the station",
    )
    dated(
        any_db,
        memory,
        EARLIER,
        NOW - timedelta(days=10),
        "the user's dog is called Pochi",
        "the quarterly report is due next week",
    )
    return memory


def test_both_legs_search_the_span_and_each_hit_keeps_its_legs_and_time(
    any_db: Database, settings: Settings, memory: MemoryManager
) -> None:
    assert memory.vector_unavailable() == "this agent's memory has no vectors yet"
    MemoryIndexer(any_db, settings).index_agent(memory.agent_id)
    assert memory.vector_unavailable() is None

    # without a time the vector leg finds both pets
    anytime = memory.search_detail("which pet does the user have", limit=5, now=NOW)
    assert anytime.window is None
    assert anytime.legs == ["lexical", "vector"]
    pets = {h.content for h in anytime.hits if "vector" in h.legs}
    assert {"the user's cat is called Tama", "the user's dog is called Pochi"} <= pets

    found = memory.search_detail("which pet did the user have yesterday", limit=5, now=NOW)
    assert found.window is not None
    assert found.window.phrase == "yesterday"
    assert found.legs == ["lexical", "vector"]
    assert found.hits[0].content == "the user's cat is called Tama"
    assert set(found.hits[0].legs) == {"lexical", "vector"}
    for hit in found.hits:  # every hit of either leg was written in the span
        assert found.window.start <= hit.created_at.astimezone(UTC) < found.window.end
        assert hit.legs
    assert "the user's dog is called Pochi" not in {h.content for h in found.hits}

    vector_only = memory.search_detail(
        "which pet did the user have yesterday", limit=5, now=NOW, mode="vector"
    )
    assert vector_only.legs == ["vector"]
    assert vector_only.hits
    assert all(h.legs == ["vector"] for h in vector_only.hits)
    assert {h.session_id for h in vector_only.hits} == {YESTERDAY}

    # a time alone has no vector leg: the span's lines, newest first, lexical
    alone = memory.search_detail("yesterday", limit=5, now=NOW)
    assert alone.legs == ["lexical"]
    assert alone.note == "lexical only: the query names a time and nothing else"
    assert {h.session_id for h in alone.hits} == {YESTERDAY}


def test_the_eval_scores_the_retrievals_own_vector_and_hybrid_legs(
    any_db: Database, settings: Settings, memory: MemoryManager
) -> None:
    registered = memory_eval.legs()
    assert {"lexical", "vector", "hybrid"} <= set(registered)
    MemoryIndexer(any_db, settings).index_agent(memory.agent_id)
    question = memory_eval.Question(
        query="what pet does the user have",
        line_id=memory.search("Tama")[0].id,
        relevant=frozenset({memory.search("Tama")[0].id}),
        kind="paraphrase",
    )
    lexical = memory_eval.score(memory, registered["lexical"], [question])
    vector = memory_eval.score(memory, registered["vector"], [question])
    hybrid = memory_eval.score(memory, registered["hybrid"], [question])
    assert lexical["recall@10"] == 0.0  # no line holds every word of the question
    assert vector["recall@10"] == 1.0
    assert hybrid["recall@10"] == 1.0
    assert registered["hybrid"](memory, "what pet does the user have", 3) == [
        h.id for h in memory.search("what pet does the user have", limit=3)
    ]
