"""MemoryManager on real SQLite: curated memory, FTS5 search in three languages, impressions."""

from __future__ import annotations

import pytest

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.errors import NotFoundError, ValidationError
from opencrab.store import Database


@pytest.fixture
def store(db: Database, settings: Settings) -> AgentStore:
    return AgentStore(db, settings)


@pytest.fixture
def memory(db: Database, store: AgentStore) -> MemoryManager:
    return MemoryManager(db, store.create(AgentCreate(name="mem")).id)


SESSION = "5d1c2f1e-4a7b-4c1e-9a2b-0c7d9e8f6a51"


def log(text: str, kind: str = "speech", session: str = SESSION) -> SessionLog:
    return SessionLog(session_id=session, log_type=kind, content=text)  # type: ignore[arg-type]


def test_curated_memory_by_category(memory: MemoryManager, db: Database, store: AgentStore) -> None:
    core = memory.save_curated("core", "I like tidy notes")
    memory.save_curated("people", "Yui prefers short answers")
    assert [m.category for m in memory.list_curated()] == ["core", "people"]
    memory.save_curated("core", "I like very tidy notes", id=core.id)
    assert [m.content for m in memory.list_curated("core")] == ["I like very tidy notes"]
    other = MemoryManager(db, store.create(AgentCreate(name="other")).id)
    with pytest.raises(NotFoundError):
        other.delete_curated(core.id)  # another agent's memory is not reachable
    with pytest.raises(ValidationError):
        memory.save_curated("core", "   ")
    memory.delete_curated(core.id)
    assert [m.category for m in memory.list_curated()] == ["people"]


def test_logs_keep_order_and_limits(memory: MemoryManager) -> None:
    memory.append_session_logs([log(f"line {n}") for n in range(5)])
    memory.append_session_log(log("other session", session="6d1c2f1e-4a7b-4c1e-9a2b-0c7d9e8f6a51"))
    assert [x.content for x in memory.session_logs(SESSION, limit=3)] == [
        "line 2",
        "line 3",
        "line 4",
    ]
    assert memory.recent_logs(limit=1)[0].content == "other session"
    assert [s.entries for s in memory.sessions()] == [1, 5]


def test_search_ranks_english_japanese_and_chinese(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            log("the weather in Tokyo is sunny"),
            log("Tokyo weather: sunny, weather again sunny weather"),
            log("東京の天気は晴れです"),
            log("大阪は雨でした"),
            log("今天北京天气很好"),
            log("inner thought about weather", kind="inner_voice"),
        ]
    )
    english = memory.search("weather sunny")
    assert [h.content for h in english][:2] == [
        "Tokyo weather: sunny, weather again sunny weather",
        "the weather in Tokyo is sunny",
    ]
    assert english[0].score >= english[1].score
    assert [h.content for h in memory.search("東京の天気")] == ["東京の天気は晴れです"]
    assert [h.content for h in memory.search("東京")] == ["東京の天気は晴れです"]  # 2 chars
    assert [h.content for h in memory.search("北京天气")] == ["今天北京天气很好"]
    assert [h.content for h in memory.search("weather", log_types=["inner_voice"])] == [
        "inner thought about weather"
    ]
    assert memory.search("weather", session_id="6d1c2f1e-4a7b-4c1e-9a2b-0c7d9e8f6a51") == []


@pytest.mark.parametrize(
    "query",
    ['foo" OR "bar', "NEAR(weather sunny)", "weath*", "content:weather", "(", '"', "AND", "-x"],
)
def test_fts_syntax_in_queries_is_only_text(memory: MemoryManager, query: str) -> None:
    memory.append_session_logs([log("the weather is sunny"), log('literal foo" OR "bar here')])
    hits = memory.search(query)
    for hit in hits:
        for word in query.split():
            assert word.lower() in hit.content.lower()


def test_search_sees_only_the_agents_own_logs(
    memory: MemoryManager, db: Database, store: AgentStore
) -> None:
    other = MemoryManager(db, store.create(AgentCreate(name="nosy")).id)
    other.append_session_log(log("private weather notes"))
    assert memory.search("weather") == []
    with pytest.raises(ValidationError, match="empty"):
        memory.search("   ")
    with pytest.raises(ValidationError, match="unknown log types"):
        memory.search("x", log_types=["gossip"])


def test_impressions_upsert_and_context(memory: MemoryManager) -> None:
    assert memory.build_context(session_id=SESSION) == ""
    first = memory.update_impression(SESSION, "u1", "Yui", personality="calm", turn=2)
    assert (first.agreement, first.last_updated_turn) == ("中立", 2)
    second = memory.update_impression(SESSION, "u1", "Yui", agreement="賛成")
    assert (second.personality, second.agreement) == ("calm", "賛成")
    assert len(memory.impressions(SESSION)) == 1
    memory.save_curated("core", "I value evidence")
    context = memory.build_context(session_id=SESSION)
    assert context.startswith("【MEMORY】\n- I value evidence")
    assert "- Yui: calm / 同意度: 賛成" in context
    assert "Yui" not in memory.build_context()  # impressions belong to the session
