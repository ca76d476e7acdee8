"""Importing Codex rollouts into a real SQLite store: the event log, an agent's memory,
the LLM metrics, idempotence, appended and cut-off files, and reading them back."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import zstandard

from opencrab.config import load_settings
from opencrab.core.agent import AgentStore
from opencrab.core.memory import MemoryManager
from opencrab.event_log import EventLog
from opencrab.events import ToolCallEvent, ToolResultEvent
from opencrab.importers.codex import parse_file
from opencrab.importers.sessions import normalized_messages
from opencrab.importers.store import Importer
from opencrab.reports.llm_metrics import usage_groups
from opencrab.store import Database
from opencrab.store.tables import (
    events,
    import_chunks,
    import_problems,
    import_sessions,
    llm_usage_metrics,
    memory_sessions,
    model_pricing,
)
from opencrab.store.types import utcnow
from tests.fakes.corpora import CODEX_FILES, last_total

COUNTED = (events, memory_sessions, llm_usage_metrics, import_chunks, import_sessions)


def counts(db: Database) -> dict[str, int]:
    with db.read() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in COUNTED
        }


def session_row(db: Database, session_id: str) -> Any:
    with db.read() as conn:
        return conn.execute(
            sa.select(import_sessions).where(import_sessions.c.id == session_id)
        ).one()


def rollout(tmp_path: Path, source: Path, keep: int | None = None) -> Path:
    """A copy of a corpus file (its first `keep` lines)."""
    target = tmp_path / "sessions" / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = source.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:keep]))
    return target


def test_the_corpus_becomes_traces_memory_and_metrics(db: Database, agent_id: str) -> None:
    with db.write() as conn:  # the corpus model, priced like gpt-5.2 for the test
        conn.execute(
            model_pricing.insert().values(
                provider="openai",
                model="gpt-5.3-codex",
                input_price_per_1m=2.0,
                output_price_per_1m=16.0,
                cache_read_price_per_1m=0.2,
                updated_at=utcnow(),
            )
        )
    summary = Importer(db, "codex", agent_id=agent_id).run([CODEX_FILES[0].parent])
    data = summary.as_json()
    assert data["files"] == 6
    assert data["files_by_status"] == {"new": 6}
    assert data["problems"] == []
    assert data["lines"] == sum(len(p.read_bytes().splitlines()) for p in CODEX_FILES)
    parsed = [parse_file(p) for p in CODEX_FILES]
    expected: dict[str, int] = {}
    for p in parsed:
        for kind, n in p.kinds.items():
            expected[kind] = expected.get(kind, 0) + n
    assert data["messages_by_source_type"] == dict(sorted(expected.items()))
    assert data["tokens"]["total_tokens"] == sum(last_total(p) for p in CODEX_FILES)
    assert data["models_without_price"] == []
    log = EventLog(db)
    types: set[str] = set()
    joined = 0
    for path, result in zip(CODEX_FILES, summary.files, strict=True):
        row = session_row(db, result.session_id)
        assert row.total_tokens == last_total(path)  # per-session totals
        assert row.model == "gpt-5.3-codex"
        assert row.provider == "openai"
        assert row.agent_id == agent_id
        trace = log.trace(result.session_id)  # every stored row is a valid AgentEvent
        assert log.token_totals(result.session_id).total_tokens == last_total(path)
        calls = {e.id for e in trace if isinstance(e, ToolCallEvent)}
        results = [e for e in trace if isinstance(e, ToolResultEvent)]
        assert all(e.content.tool_call_id in calls for e in results)
        joined += len(results)
        types |= {e.type for e in trace}
        # one chain: every event but the first hangs off an earlier one
        assert sum(e.parent_id is None for e in trace) == 1
    assert joined == expected["tool_result"]  # every output of the corpus found its call
    assert types == {"user", "reasoning", "tool_call", "tool_result", "message", "token_usage"}
    # the agent remembers: a word from the first user message is found by search
    first = next(e.content.text for e in log.trace(summary.files[0].session_id) if e.type == "user")
    word = max(first.split(), key=len)
    hits = MemoryManager(db, agent_id).search(word, session_id=summary.files[0].session_id)
    assert hits
    said = {str(e.id): e for f in summary.files for e in log.trace(f.session_id)}
    # each log line names its event (how hits rank is the search's own, per database)
    assert all(h.event_id in said for h in hits)
    assert any(said[h.event_id or ""].type == "user" for h in hits)
    # LLM analytics: one row per counted call, priced from the table
    rows = usage_groups(db, group_by="model", agent_id=agent_id)
    assert [(r.key, r.calls, r.total_tokens) for r in rows] == [
        ("gpt-5.3-codex", data["calls"], data["tokens"]["total_tokens"])
    ]
    tokens = data["tokens"]
    cached = tokens["cached_input_tokens"]
    assert cached > 0  # cached input costs the cache rate, the rest the input rate
    cost = (
        (tokens["input_tokens"] - cached) * 2.0 + cached * 0.2 + tokens["output_tokens"] * 16.0
    ) / 1e6
    assert rows[0].cost_usd == pytest.approx(cost)
    assert data["cost_usd"] == pytest.approx(cost)
    with db.read() as conn:
        purposes = conn.execute(sa.select(llm_usage_metrics.c.purpose).distinct()).scalars()
        assert list(purposes) == ["import"]


def test_importing_again_adds_nothing(db: Database, agent_id: str, tmp_path: Path) -> None:
    paths = [rollout(tmp_path, p) for p in CODEX_FILES]
    Importer(db, "codex", agent_id=agent_id).run([tmp_path / "sessions"])
    before = counts(db)
    again = Importer(db, "codex", agent_id=agent_id).run([tmp_path / "sessions"]).as_json()
    assert again["files_by_status"] == {"unchanged": 6}
    assert again["lines"] == again["messages"] == again["events"] == 0
    assert counts(db) == before
    # a touched file is read again (its mtime moved), and still adds nothing
    os.utime(paths[0], (1, 1))
    touched = Importer(db, "codex", agent_id=agent_id).run([paths[0]]).as_json()
    assert touched["files_by_status"] == {"unchanged": 1}
    assert counts(db) == before


def test_an_appended_file_imports_only_its_new_lines(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    source = CODEX_FILES[0]
    whole = source.read_bytes().splitlines(keepends=True)
    path = rollout(tmp_path, source, keep=len(whole) // 2)
    first = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    assert first.status == "new"
    assert first.lines == len(whole) // 2
    with path.open("ab") as handle:
        handle.writelines(whole[len(whole) // 2 :])
    second = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    assert second.status == "appended"
    assert second.lines == len(whole) - len(whole) // 2
    assert second.problems == []  # outputs in the new part found their calls in the old
    # the same as importing the whole file at once, into another store
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    other.upgrade()
    at_once = Importer(other, "codex").run([rollout(tmp_path / "b", source)]).files[0]
    row, at_once_row = session_row(db, first.session_id), session_row(other, at_once.session_id)
    for column in ("lines", "bytes", "messages", "calls", "total_tokens", "input_tokens"):
        assert getattr(row, column) == getattr(at_once_row, column), column
    assert row.kinds_json == at_once_row.kinds_json
    assert row.total_tokens == last_total(source)
    log = EventLog(db)
    trace = log.trace(first.session_id)
    assert len(trace) == len(EventLog(other).trace(at_once.session_id))
    assert sum(e.parent_id is None for e in trace) == 1  # the chain continued
    assert log.token_totals(first.session_id).total_tokens == last_total(source)
    # reading it back: the stored lines normalize exactly like the file itself
    _, transcript = normalized_messages(db, first.session_id)
    assert transcript.messages == parse_file(path).messages


def test_a_cut_off_last_line_is_read_again_once_complete(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    lines = CODEX_FILES[4].read_bytes().splitlines(keepends=True)
    path = rollout(tmp_path, CODEX_FILES[4])
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # Codex is mid-write
    first = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    assert [p.reason for p in first.problems] == [
        "truncated last line (no newline, not complete JSON)"
    ]
    assert first.lines == len(lines) - 1
    path.write_bytes(b"".join(lines))
    second = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    assert second.status == "appended"
    assert second.lines == 1
    assert second.problems == []
    with db.read() as conn:
        stored = conn.execute(sa.select(import_problems)).all()
    assert stored == []  # the problem went away with the line it was about
    assert session_row(db, first.session_id).lines == len(lines)


def test_a_rewritten_file_is_reported_and_left_alone(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    path = rollout(tmp_path, CODEX_FILES[5])
    Importer(db, "codex", agent_id=agent_id).run([path])
    before = counts(db)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"user"', b'"USER"', 1) + data[-200:])
    result = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    assert result.status == "changed"
    assert "changed since it was imported" in result.problems[0].reason
    assert counts(db) == before


def test_zstd_and_hostile_files(db: Database, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    raw = CODEX_FILES[5].read_bytes()
    (folder / "rollout-a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    hostile = [
        b'{"timestamp":"2026-02-23T10:00:00Z","type":"session_meta","payload":{"id":"s"}}\n',
        b"not json\n",
        b"[1,2]\n",
        b'{"timestamp":"2026-02-23T10:00:01Z","type":"hologram","payload":{"x":1}}\n',
        b"\n",
        b'{"timestamp":"2026-02-23T10:00:02Z","type":"response_item","payload":{"type":'
        b'"message","role":"user","content":[{"type":"input_text","text":"<script>x</script>'
        b'hi"}]}}\n',
    ]
    (folder / "rollout-b.jsonl").write_bytes(b"".join(hostile))
    (folder / "rollout-c.jsonl.zst").write_bytes(b"not zstd at all")
    summary = Importer(db, "codex").run([folder, tmp_path / "missing"]).as_json()
    by_file = {Path(s["file"]).name: s for s in summary["sessions"]}
    assert by_file["rollout-a.jsonl.zst"]["status"] == "new"
    assert by_file["rollout-a.jsonl.zst"]["lines"] == len(raw.splitlines())
    assert by_file["rollout-b.jsonl"]["lines"] == 6
    assert by_file["rollout-c.jsonl.zst"]["status"] == "failed"
    reasons = {(Path(p["file"]).name, p["line"]): p["reason"] for p in summary["problems"]}
    assert reasons[("missing", 0)] == "no such file or folder"
    assert reasons[("rollout-b.jsonl", 2)].startswith("not valid JSON")
    assert reasons[("rollout-b.jsonl", 3)] == "a JSON list, not an object"
    assert "unknown event (hologram)" in reasons[("rollout-b.jsonl", 4)]
    assert reasons[("rollout-c.jsonl.zst", 0)].startswith("cannot read")
    # the user's text goes to the event log as written; the API view is sanitised HTML
    # standing for the same text (the script is text, never a tag)
    session = by_file["rollout-b.jsonl"]["id"]
    said = [e for e in EventLog(db).trace(session) if e.type == "user"]
    assert [e.content.text for e in said] == ["<script>x</script>hi"]
    _, transcript = normalized_messages(db, session)
    user = next(m for m in transcript.messages if m["role"] == "user")
    assert user["segments"][0]["text"] == "&lt;script&gt;x&lt;/script&gt;hi"


def test_a_legacy_rollout_imports(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "rollout-2025-05-01-legacy.jsonl"
    lines = [
        {"id": "legacy-1", "timestamp": "2025-05-01T09:00:00Z", "instructions": "be nice"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
        {"type": "function_call", "name": "shell", "arguments": '{"cmd":["ls"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"output":"a b"}'},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = Importer(db, "codex").run([path]).files[0]
    assert result.problems == []
    trace = EventLog(db).trace(result.session_id)
    assert [e.type for e in trace] == ["user", "tool_call", "tool_result", "message"]
    assert trace[1].content.arguments == {"cmd": ["ls"]}
    # seed 003: no per-line timestamps → the session start + 1 s per line
    assert [e.timestamp.second for e in trace] == [2, 3, 4, 5]
    row = session_row(db, result.session_id)
    assert row.external_id == "legacy-1"
    assert row.title == "ls"


def test_an_unknown_agent_or_source_is_refused(db: Database) -> None:
    from opencrab.errors import ValidationError

    with pytest.raises(ValidationError, match="unknown transcript source 'gemini'"):
        Importer(db, "gemini")


def test_deleting_the_agent_keeps_the_import(db: Database, agent_id: str, tmp_path: Path) -> None:
    path = rollout(tmp_path, CODEX_FILES[5])
    result = Importer(db, "codex", agent_id=agent_id).run([path]).files[0]
    settings = load_settings(None, overrides={"data_dir": str(tmp_path)})
    AgentStore(db, settings).delete(agent_id)
    row = session_row(db, result.session_id)
    assert row.agent_id is None
    assert row.lines > 0
    shutil.rmtree(tmp_path / "sessions")  # the file is gone: the stored lines remain
    _, transcript = normalized_messages(db, result.session_id)
    assert len(transcript.messages) == row.messages
