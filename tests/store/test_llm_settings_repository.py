"""The LLM settings and monitoring repositories on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from opencrab.llm.metrics import CallRecord
from opencrab.store import Database
from opencrab.store.repositories import llm_monitoring, llm_settings
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.llm_settings import AuditEntry


def test_provider_rows_are_created_then_updated_column_by_column(any_db: Database) -> None:
    with any_db.write() as conn:
        llm_settings.save_provider(conn, "openrouter", {"enabled": False})
        llm_settings.save_provider(
            conn, "openrouter", {"api_key_encrypted": "gAAAA-token", "api_key_last4": "AB12"}
        )
        llm_settings.save_provider(conn, "ollama", {"base_url": "http://gpu:11434"})
    with any_db.read() as conn:
        rows = llm_settings.providers(conn)
        assert llm_settings.encrypted_keys(conn) == 1
    assert rows["openrouter"].enabled is False  # kept when the key was set
    assert rows["openrouter"].api_key_last4 == "AB12"
    assert rows["ollama"].base_url == "http://gpu:11434"
    assert rows["ollama"].enabled is None
    with any_db.write() as conn:
        llm_settings.save_provider(
            conn, "openrouter", {"api_key_encrypted": None, "api_key_last4": None}
        )
    with any_db.read() as conn:
        assert llm_settings.encrypted_keys(conn) == 0


def test_aliases_chain_and_audit(any_db: Database) -> None:
    with any_db.read() as conn:
        assert llm_settings.chain(conn) is None
    with any_db.write() as conn:
        llm_settings.save_alias(conn, "mine", "openai", "gpt-5.2")
        llm_settings.save_alias(conn, "fast", None, None)
        llm_settings.save_chain(conn, ["anthropic", "openai"])
        llm_settings.save_chain(conn, ["openai"])
        llm_settings.audit(conn, [AuditEntry("ops", "aliases.mine", "set", "openai/gpt-5.2")])
        llm_settings.audit(conn, [AuditEntry("local", "fallback.chain", "set", "openai")])
    with any_db.read() as conn:
        aliases = llm_settings.aliases(conn)
        assert llm_settings.chain(conn) == ["openai"]
        log = llm_settings.audit_log(conn)
        assert len(llm_settings.audit_log(conn, limit=1, offset=1)) == 1
    assert (aliases["mine"].provider, aliases["mine"].removed) == ("openai", False)
    assert aliases["fast"].removed is True
    assert [(e.actor, e.target) for e in log] == [
        ("local", "fallback.chain"),
        ("ops", "aliases.mine"),
    ]
    assert all(e.at is not None for e in log)


def test_latency_percentiles_per_provider(any_db: Database) -> None:
    now = datetime.now(UTC)

    def call(provider: str, ms: int, *, ok: bool = True, age_days: int = 0) -> CallRecord:
        return CallRecord(
            id=str(uuid.uuid4()),
            provider=provider,
            model="m",
            purpose="conversation",
            latency_ms=ms,
            status="ok" if ok else "error",
            timestamp=now - timedelta(days=age_days),
        )

    records = [call("openai", ms) for ms in range(10, 110, 10)]  # 10 … 100
    records += [call("openai", 9999, ok=False), call("openai", 5000, age_days=10)]
    records += [call("anthropic", 42)]
    with any_db.write() as conn:
        metrics_repo.insert(conn, [r.as_row() for r in records])
    with any_db.read() as conn:
        week = llm_monitoring.latency_stats(conn, since=now - timedelta(days=7))
        everything = llm_monitoring.latency_stats(conn, since=None)
    assert week["openai"] == llm_monitoring.LatencyStats("openai", 10, 50, 100, 100)
    assert week["anthropic"] == llm_monitoring.LatencyStats("anthropic", 1, 42, 42, 42)
    assert everything["openai"].max_ms == 5000  # the failed call's latency never counts
    assert everything["openai"].ok_calls == 11
