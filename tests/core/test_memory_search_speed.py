"""Memory search's speed work (issue 35), for its behaviour, not its timing:

- the per-process query-vector cache: the same query to the same embedder is embedded
  once; another model, the same model name behind another endpoint or key, or a
  forgotten embedder never gets a vector it did not make (requests counted on a fake
  server speaking the real `/v1/embeddings` wire format);
- the vector leg's float16 scoring with exact rescoring returns what the float32
  product returns: the same lines in the same order (ties: stored first), with
  filters, near-duplicates and fewer allowed lines than asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ModelRef, ProviderConfig
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.embedding import (
    QUERIES,
    OpenAICompatibleEmbedder,
    QueryCache,
    forget_embedder,
    query_vector,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_index import MemoryIndexer
from opencrab.core.memory_vectors import VectorIndex
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.store import Database
from opencrab.store.repositories import memory_vectors as repo
from tests.fakes.llm_server import Recorded, Reply

S1 = "11111111-1111-4111-8111-111111111111"
PATH = "/v1/embeddings"


def _embeddings(request: Recorded) -> Reply:
    """A fake model whose vectors depend on the model name and the text."""
    body = request.json
    data = []
    for i, text in enumerate(body["input"]):
        seed = sum(map(ord, body["model"] + "|" + text))
        vector = np.random.default_rng(seed).standard_normal(8)
        data.append({"object": "embedding", "index": i, "embedding": vector.tolist()})
    return Reply(json={"object": "list", "data": data, "model": body["model"]})


@pytest.fixture
def server(fake_llm_server: Any) -> Any:
    fake_llm_server.respond(PATH, _embeddings)
    return fake_llm_server


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    QUERIES.clear()
    yield
    QUERIES.clear()


def asked(server: Any) -> list[list[str]]:
    return [json.loads(r.body)["input"] for r in server.requests_to(PATH)]


def test_the_same_query_is_embedded_once(server: Any) -> None:
    embedder = OpenAICompatibleEmbedder("openai/a", server.url + "/v1", "a")
    first = query_vector(embedder, "what pet does the user have")
    again = query_vector(embedder, "what pet does the user have")
    assert asked(server) == [["what pet does the user have"]]
    assert np.array_equal(first, again)
    assert np.array_equal(first, embedder.embed_query("what pet does the user have"))
    with pytest.raises(ValueError, match="read-only"):
        again[0] = 1.0  # shared between searches: read-only
    query_vector(embedder, "another question")
    assert len(asked(server)) == 3  # the direct call above, then the new text


def test_another_model_never_gets_a_cached_vector(server: Any) -> None:
    one = OpenAICompatibleEmbedder("openai/a", server.url + "/v1", "a")
    other = OpenAICompatibleEmbedder("openai/b", server.url + "/v1", "b")
    a = query_vector(one, "the cat")
    b = query_vector(other, "the cat")
    assert len(asked(server)) == 2
    assert not np.allclose(a, b)
    assert np.array_equal(b, other.embed_query("the cat"))


def test_a_changed_endpoint_key_embeds_again(server: Any) -> None:
    old = OpenAICompatibleEmbedder("openai/a", server.url + "/v1", "a", api_key="sk-old")
    new = OpenAICompatibleEmbedder("openai/a", server.url + "/v1", "a", api_key="sk-new")
    query_vector(old, "the cat")
    query_vector(new, "the cat")
    keys = [r.headers["authorization"] for r in server.requests_to(PATH)]
    assert keys == ["Bearer sk-old", "Bearer sk-new"]
    query_vector(new, "the cat")  # now cached for the new key
    assert len(server.requests_to(PATH)) == 2


def test_forgetting_an_embedder_drops_its_vectors(server: Any) -> None:
    kept = OpenAICompatibleEmbedder("openai/kept", server.url + "/v1", "kept")
    gone = OpenAICompatibleEmbedder("openai/gone", server.url + "/v1", "gone")
    query_vector(kept, "q")
    query_vector(gone, "q")
    forget_embedder("openai/gone")
    query_vector(gone, "q")
    query_vector(kept, "q")
    assert [json.loads(r.body)["model"] for r in server.requests_to(PATH)] == [
        "kept",
        "gone",
        "gone",
    ]


def test_the_cache_keeps_the_most_recently_used(server: Any) -> None:
    embedder = OpenAICompatibleEmbedder("openai/a", server.url + "/v1", "a")
    cache = QueryCache(size=2)
    for text in ("one", "two", "one", "three"):  # "two" is the least recently used
        cache.vector(embedder, text)
    assert len(cache) == 2
    cache.vector(embedder, "one")
    cache.vector(embedder, "two")
    assert asked(server) == [["one"], ["two"], ["three"], ["two"]]
    assert (cache.hits, cache.misses) == (2, 4)


def test_a_search_asked_twice_embeds_its_query_once(
    db: Database, settings: Settings, server: Any
) -> None:
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="twice"))
    config = agent.llm_config
    config.models.embedding = ModelRef(provider="openai", model="small")
    store.save_llm_config(agent.id, config)
    memory = MemoryManager(db, agent.id)
    memory.append_session_logs(
        [SessionLog(session_id=S1, log_type="speech", content=t) for t in ("a cat", "a dog")]
    )
    provider = OpenAIProvider(
        ProviderConfig(base_url=server.url + "/v1", api_key=SecretStr("sk-1"))
    )
    indexer = MemoryIndexer(db, settings, providers={"openai": provider})
    try:
        assert indexer.index_agent(agent.id) == 2
        first = memory.search_detail("which animal", limit=2)
        second = memory.search_detail("which animal", limit=2)
        assert first.legs == ["lexical", "vector"]
        assert [(h.id, h.legs) for h in first.hits] == [(h.id, h.legs) for h in second.hits]
        assert asked(server).count(["which animal"]) == 1
    finally:
        forget_embedder("openai/small")


# ------------------------------------------------------------------ float16 + rescoring
DIM = 384


def _agent_with_vectors(
    db: Database, settings: Settings, rows: np.ndarray
) -> tuple[str, list[int]]:
    agent = AgentStore(db, settings).create(AgentCreate(name="vectors"))
    memory = MemoryManager(db, agent.id)
    memory.append_session_logs(
        [SessionLog(session_id=S1, log_type="speech", content=f"l{n}") for n in range(len(rows))]
    )
    pending = repo.pending_lines(db, agent.id, "test/m", limit=len(rows))
    with db.write() as conn:
        repo.save_vectors(
            conn,
            agent.id,
            "test/m",
            [(line.id, rows[n].astype("<f4").tobytes()) for n, line in enumerate(pending)],
            DIM,
        )
    return agent.id, [line.id for line in pending]


def _unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)
    return out


def test_float16_scoring_finds_what_the_float32_product_finds(
    db: Database, settings: Settings
) -> None:
    rng = np.random.default_rng(35)
    # clustered like real embeddings (a shared direction plus noise), with exact
    # duplicates and near-duplicates that differ below float16's precision
    base = rng.standard_normal(DIM)
    rows = _unit(base + 0.6 * rng.standard_normal((1500, DIM)))
    rows[100:140] = rows[7]  # 41 identical rows: ties go to the line stored first
    rows[200:240] = _unit(rows[9] + 1e-5 * rng.standard_normal((40, DIM)))
    agent, ids = _agent_with_vectors(db, settings, rows)
    exact, half = VectorIndex(half=False), VectorIndex(half=True)
    queries = [rows[7], rows[9], _unit(base + 0.6 * rng.standard_normal(DIM))]
    queries += list(_unit(base + 0.6 * rng.standard_normal((20, DIM))))
    only = set(ids[::3])  # a filter (session, log type or time span in a search)
    for query in queries:
        for limit in (1, 10, 30):
            want = exact.search(db, agent, "test/m", query, limit=limit)
            got = half.search(db, agent, "test/m", query, limit=limit)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6)
            want = exact.search(db, agent, "test/m", query, limit=limit, only=only)
            got = half.search(db, agent, "test/m", query, limit=limit, only=only)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert {i for i, _ in got} <= only
    tied = exact.search(db, agent, "test/m", rows[7], limit=5)
    assert [i for i, _ in tied] == [ids[7], *ids[100:104]]  # the same vector: stored first


def test_fewer_allowed_lines_than_asked_for(db: Database, settings: Settings) -> None:
    rows = _unit(np.random.default_rng(1).standard_normal((50, DIM)))
    agent, ids = _agent_with_vectors(db, settings, rows)
    for index in (VectorIndex(half=False), VectorIndex(half=True)):
        found = index.search(db, agent, "test/m", rows[0], limit=10, only={ids[0], ids[5]})
        assert [i for i, _ in found][:1] == [ids[0]]  # the query is its vector
        assert sorted(i for i, _ in found) == sorted([ids[0], ids[5]])
        assert index.search(db, agent, "test/m", rows[0], limit=10, only=set()) == []
