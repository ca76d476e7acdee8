"""`opencrab memory eval` on a fresh install with no key: the built-in questions from
the agent's own lines, the lexical leg's figures, the legs this install lacks named as
not available, each run stored; an agent with nothing to ask about is told so."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.config import load_settings
from opencrab.core.agent import AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_eval import runs
from opencrab.store import Database
from tests.fakes.ports import closed_port

runner = CliRunner()
app = build_app()

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
    "The passport renewal appointment is at the city office",
    "Ship the invoices to accounting before the quarterly close",
]


@pytest.fixture(autouse=True)
def no_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", url)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", url)


def ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}{result.stdout}"
    return result.stdout


def remember(name: str, lines: list[str]) -> tuple[Database, str]:
    settings = load_settings()
    db = Database(settings.database_url)
    agent = AgentStore(db, settings).get(name)
    MemoryManager(db, agent.id).append_session_logs(
        [SessionLog(session_id=str(uuid4()), log_type="speech", content=t) for t in lines]
    )
    return db, agent.id


def test_eval_runs_on_a_fresh_install_with_no_key(data_dir: Path) -> None:
    assert not data_dir.exists()
    ok("agent", "create", "--name", "aki")
    db, agent_id = remember("aki", LINES)
    try:
        table = ok("memory", "eval", "aki")
        assert "memory recall of 12 questions (builtin questions)" in table
        assert "lexical" in table
        assert "vector: not available" in table
        assert "hybrid: not available" in table

        doc = json.loads(ok("memory", "eval", "aki", "--questions", "5", "--json"))
        assert (doc["questions"], doc["generator"]) == (5, "builtin")
        lexical = doc["legs"]["lexical"]
        assert lexical["available"] is True
        # every built-in question is words of its line: the full-text leg finds each one
        assert lexical["recall@10"] == 1.0
        assert 0 < lexical["mrr"] <= 1
        assert lexical["recall@1"] <= lexical["recall@5"] <= lexical["recall@10"]
        assert lexical["p50_ms"] > 0
        assert doc["legs"]["vector"] == {
            "available": False,
            "note": "this agent's memory has no vectors yet",
        }
        stored = runs(db, agent_id)
        assert [r.questions for r in stored] == [5, 12]  # newest first
        assert stored[0].id == doc["id"]
    finally:
        db.close()


def test_eval_of_an_agent_without_memory_says_why(data_dir: Path) -> None:
    ok("agent", "create", "--name", "empty")
    result = runner.invoke(app, ["memory", "eval", "empty"])
    assert result.exit_code == 1
    assert "has no memory lines to ask about yet" in result.stderr
    result = runner.invoke(app, ["memory", "eval", "empty", "--generator", "magic"])
    assert result.exit_code == 1
    assert "choose auto, builtin or model" in result.stderr
    result = runner.invoke(app, ["memory", "eval", "nobody"])
    assert result.exit_code == 1
    assert "nobody" in result.stderr
