"""Embedders (issue 35): the OpenAI-compatible one against a fake server speaking the
real `/v1/embeddings` wire format (OpenAI with its key, Ollama and llama.cpp under `/v1`),
its failures named; the agent's `embedding` purpose model choosing the embedder; and a
whole hybrid search over vectors that came over the wire, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from opencrab.config import Settings
from opencrab.config.models import ModelRef, ProviderConfig
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.embedding import (
    PACKAGED_NAME,
    EmbedderUnavailable,
    OpenAICompatibleEmbedder,
    PackagedEmbedder,
    chosen_ref,
    embedder_name,
    endpoint_embedder,
    forget_embedder,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_index import MemoryIndexer, progress
from opencrab.llm.providers.anthropic import AnthropicProvider
from opencrab.llm.providers.llamacpp import LlamaCppProvider
from opencrab.llm.providers.ollama import OllamaProvider
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.store import Database
from tests.fakes.llm_server import Recorded, Reply

S1 = "11111111-1111-4111-8111-111111111111"

# a tiny "model" the fake server runs: one dimension per topic, words vote for theirs
TOPICS = {
    0: ("pet", "cat", "dog", "tama", "animal"),
    1: ("server", "deploy", "deployed", "build"),
    2: ("lunch", "ramen", "food", "eat"),
}


def _vector(text: str) -> list[float]:
    words = text.lower().replace("'", " ").replace("?", " ").split()
    return [float(sum(w in topic for w in words)) + 0.01 for topic in TOPICS.values()]


def _embeddings(request: Recorded) -> Reply:
    body = request.json
    texts = body["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(texts)
    ]
    data.reverse()  # the order is the `index`'s, not the list's
    return Reply(
        json={
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }
    )


def test_openai_embeddings_on_the_wire(fake_llm_server: Any) -> None:
    fake_llm_server.respond("/v1/embeddings", _embeddings)
    provider = OpenAIProvider(
        ProviderConfig(base_url=fake_llm_server.url + "/v1", api_key=SecretStr("sk-test"))
    )
    ref = ModelRef(provider="openai", model="text-embedding-3-small")
    embedder = endpoint_embedder(ref, {"openai": provider})
    assert embedder.name == "openai/text-embedding-3-small"
    rows = embedder.embed_passages(["the cat", "deploy the server"])
    sent = fake_llm_server.requests_to("/v1/embeddings")[-1]
    assert sent.json == {
        "model": "text-embedding-3-small",
        "input": ["the cat", "deploy the server"],
    }
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert rows.shape == (2, 3)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert rows[0].argmax() == 0
    assert rows[1].argmax() == 1
    query = embedder.embed_query("a pet")
    assert query.shape == (3,)
    assert query.argmax() == 0


@pytest.mark.parametrize("kind", ["ollama", "llamacpp"])
def test_local_servers_are_asked_under_v1(fake_llm_server: Any, kind: str) -> None:
    fake_llm_server.respond("/v1/embeddings", _embeddings)
    provider = (
        OllamaProvider(ProviderConfig(base_url=fake_llm_server.url), name="ollama")
        if kind == "ollama"
        else LlamaCppProvider(ProviderConfig(base_url=fake_llm_server.url), name="llamacpp")
    )
    embedder = endpoint_embedder(ModelRef(provider=kind, model="nomic"), {kind: provider})
    assert embedder.embed_passages(["lunch was ramen"])[0].argmax() == 2
    sent = fake_llm_server.requests_to("/v1/embeddings")[-1]
    assert "authorization" not in sent.headers


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(status=404, json={"error": {"message": "model not found"}}), "HTTP 404"),
        (Reply(body=b"{not json", content_type="application/json"), "without a list"),
        (Reply(json={"data": [{"index": 0, "embedding": []}]}), "uneven or no length"),
        (Reply(json={"data": []}), "sent 0 vectors"),
    ],
)
def test_a_bad_answer_is_named(fake_llm_server: Any, reply: Reply, said: str) -> None:
    fake_llm_server.reply("/v1/embeddings", reply)
    provider = OllamaProvider(ProviderConfig(base_url=fake_llm_server.url), name="ollama")
    embedder = endpoint_embedder(ModelRef(provider="ollama", model="x"), {"ollama": provider})
    with pytest.raises(EmbedderUnavailable, match=said):
        embedder.embed_passages(["one"])


def test_a_provider_without_an_embeddings_endpoint_is_refused() -> None:
    with pytest.raises(EmbedderUnavailable, match="no provider 'ollama'"):
        endpoint_embedder(ModelRef(provider="ollama", model="x"), {})
    anthropic = AnthropicProvider(ProviderConfig(api_key=SecretStr("k")))
    with pytest.raises(EmbedderUnavailable, match="no OpenAI-compatible embeddings endpoint"):
        endpoint_embedder(ModelRef(provider="anthropic", model="x"), {"anthropic": anthropic})


def test_the_purpose_model_chooses(settings: Settings) -> None:
    # the shipped default names openai/text-embedding-3-large, which a fresh install
    # cannot call: the packaged embedder is used until someone chooses
    assert settings.llm.models.embedding is not None
    assert chosen_ref(settings, None) is None
    assert embedder_name(None) == PACKAGED_NAME
    mine = ModelRef(provider="ollama", model="bge-m3")
    assert chosen_ref(settings, mine) == mine
    packaged = ModelRef(provider="opencrab", model="multilingual-e5-small")
    assert chosen_ref(settings, packaged) is None


def test_the_user_config_chooses_for_every_agent(data_dir: Any, tmp_path: Any) -> None:
    from opencrab.config import load_settings

    config = tmp_path / "user.toml"
    config.write_text(
        '[llm.models]\nembedding = { provider = "ollama", model = "nomic-embed-text" }\n',
        encoding="utf-8",
    )
    settings = load_settings(config)
    assert chosen_ref(settings, None) == ModelRef(provider="ollama", model="nomic-embed-text")


def test_the_packaged_embedder_reads_japanese_and_chinese() -> None:
    embedder = PackagedEmbedder()
    rows = embedder.embed_passages(
        ["ユーザーの猫の名前はタマ", "金曜日にサーバーをデプロイした", "用户的猫叫小玉"]
    )
    assert rows.shape == (3, 384)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    pet_ja = embedder.embed_query("ユーザーのペットは？")
    pet_zh = embedder.embed_query("用户有什么宠物")
    assert (rows @ pet_ja).argmax() in (0, 2)  # a cat line, not the deployment
    assert (rows @ pet_zh)[2] > (rows @ pet_zh)[1]


def test_hybrid_search_over_vectors_from_the_wire(
    any_db: Database, settings: Settings, fake_llm_server: Any
) -> None:
    fake_llm_server.respond("/v1/embeddings", _embeddings)
    store = AgentStore(any_db, settings)
    agent = store.create(AgentCreate(name="w"))
    config = agent.llm_config
    config.models.embedding = ModelRef(provider="ollama", model="topics")
    store.save_llm_config(agent.id, config)
    memory = MemoryManager(any_db, agent.id)
    memory.append_session_logs(
        [
            SessionLog(session_id=S1, log_type="speech", content=text)
            for text in ("the user's cat is called Tama", "we deployed on friday", "ramen")
        ]
    )
    provider = OllamaProvider(ProviderConfig(base_url=fake_llm_server.url), name="ollama")
    indexer = MemoryIndexer(any_db, settings, providers={"ollama": provider})
    try:
        assert indexer.index_agent(agent.id) == 3
        shown = progress(any_db, settings, agent.id)
        assert shown.text == "embedded 3 of 3 with ollama/topics"
        hits = memory.search("what pet does the user have", limit=1)
        assert [(h.content, h.legs) for h in hits] == [
            ("the user's cat is called Tama", ["vector"])
        ]
        sent = [json.loads(r.body)["input"] for r in fake_llm_server.requests_to("/v1/embeddings")]
        assert sent[-1] == ["what pet does the user have"]  # the query, same model
    finally:
        forget_embedder("ollama/topics")


def test_a_reply_past_the_cap_is_refused(fake_llm_server: Any) -> None:
    fake_llm_server.respond("/v1/embeddings", _embeddings)
    embedder = OpenAICompatibleEmbedder(
        "openai/x", fake_llm_server.url + "/v1", "x", max_reply_bytes=100
    )
    with pytest.raises(EmbedderUnavailable, match="more than 100 bytes"):
        embedder.embed_passages(["one", "two", "three"])


def test_a_changed_key_reaches_the_embedder_without_a_restart(
    db: Database, settings: Settings, fake_llm_server: Any
) -> None:
    fake_llm_server.respond("/v1/embeddings", _embeddings)
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="k"))
    config = agent.llm_config
    config.models.embedding = ModelRef(provider="openai", model="text-embedding-3-small")
    store.save_llm_config(agent.id, config)
    memory = MemoryManager(db, agent.id)

    def provider(key: str) -> OpenAIProvider:
        return OpenAIProvider(
            ProviderConfig(base_url=fake_llm_server.url + "/v1", api_key=SecretStr(key))
        )

    providers = {"openai": provider("sk-old")}  # the router's live mapping
    indexer = MemoryIndexer(db, settings, providers=providers)
    try:
        memory.append_session_logs([SessionLog(session_id=S1, log_type="speech", content="a cat")])
        assert indexer.index_agent(agent.id) == 1
        providers["openai"] = provider("sk-new")  # a key saved on the dashboard
        memory.append_session_logs([SessionLog(session_id=S1, log_type="speech", content="a dog")])
        assert indexer.index_agent(agent.id) == 1
        keys = [r.headers["authorization"] for r in fake_llm_server.requests_to("/v1/embeddings")]
        assert keys[-2:] == ["Bearer sk-old", "Bearer sk-new"]
    finally:
        forget_embedder("openai/text-embedding-3-small")
