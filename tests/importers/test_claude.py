"""The Claude Code importer over a hand-made session file that has what real ones have:
a summary, content blocks split over lines that share a message id (and repeat its
usage), thinking and redacted thinking, tool_use/tool_result with an error, an image,
a branch (an edited prompt), Claude Code's own lines on the user's side, a synthetic
error message, a sidechain, and lines nobody should trust."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager
from opencrab.event_log import EventLog
from opencrab.importers.claude import find_sessions, parse_file, scan_lines
from opencrab.importers.sessions import normalized_messages
from opencrab.importers.store import Importer, event_id
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.fakes.corpora import CLAUDE_CORPUS, CLAUDE_FILE


def raw_lines() -> list[dict[str, Any] | None]:
    out: list[dict[str, Any] | None] = []
    for line in CLAUDE_FILE.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            out.append(None)
    return out


def test_every_line_is_normalized_or_reported() -> None:
    parsed = parse_file(CLAUDE_FILE)
    assert find_sessions([CLAUDE_CORPUS]) == ([CLAUDE_FILE], [])
    assert parsed.session_id == "4f35e220-c435-4cf7-b9b9-f40426042847"
    assert parsed.title == "Add a config file to the crab project"  # the summary line
    assert parsed.header["cwd"] == "/home/dev/crab"
    assert [(p.line, p.reason.split(";")[0].split(":")[0]) for p in parsed.problems] == [
        (19, "unknown line (hologram)"),
        (20, "not valid JSON"),
        (22, "tool_result for tool_use_id 'toolu_9' with no tool_use before it"),
    ]
    lines = {m["raw"]["line_index"] + 1 for m in parsed.messages}
    assert lines | {p.line for p in parsed.problems} == set(range(1, 23))
    # one NormalizedMessage per content block (lines 10 and 11 hold two each), none for
    # the line that is not JSON
    assert len(parsed.messages) == 22 - 1 + 2
    by_id = {m["id"]: m for m in parsed.messages}
    assert "2026-02-20T10:00:15.000Z#10.1" in by_id
    assert parsed.kinds == {
        "session": 1,
        "message": 12,
        "meta": 5,
        "tool_call": 2,
        "tool_result": 3,
    }


def test_blocks_roles_and_joins() -> None:
    messages = parse_file(CLAUDE_FILE).messages
    at = {m["id"].split("#")[1]: m for m in messages}
    first = at["2"]
    assert (first["role"], first["source_type"]) == ("user", "message")
    assert first["segments"] == [
        {
            "channel": "input",
            "type": "text",
            "format": "text",
            # as written: `<b>` is no allow-listed tag, so it is text
            "text": "Please add a config file &lt;b&gt;now&lt;/b&gt; &amp; keep it small",
            "annotations": [],
        }
    ]
    assert first["metadata"]["uuid"] == "u1"
    assert first["metadata"]["parentUuid"] is None
    # Claude Code's own lines on the user's side are not the user speaking
    assert at["3"]["role"] == "system"
    assert at["3"]["metadata"]["injected"] == "meta"
    assert at["17"]["role"] == "system"
    assert at["17"]["metadata"]["injected"] == "command"
    thinking = at["4"]
    assert (thinking["role"], thinking["source_type"]) == ("assistant", "meta")
    assert thinking["segments"][0]["text"] == "The user wants a small config file."
    assert thinking["raw"]["signature_sha256"] == hashlib.sha256(b"c2lnbmF0dXJl").hexdigest()
    redacted = at["10"]
    assert redacted["segments"] == []
    assert (
        redacted["raw"]["encrypted_sha256"]
        == hashlib.sha256(b"RW5jcnlwdGVkIHJlYXNvbmluZw==").hexdigest()
    )
    assert at["10.1"]["segments"][0]["text"] == "Done: config.toml holds x = 1."
    call, result = at["6"], at["7"]
    assert call["tool_call"]["arguments_json"] == {
        "file_path": "/home/dev/crab/config.toml",
        "content": "x = 1\n",
    }
    assert result["tool_call"]["call_id"] == call["tool_call"]["call_id"] == "toolu_1"
    assert result["tool_call"]["name"] == "Write"
    assert at["9"]["tool_call"]["status"] == "error"
    assert at["9"]["tool_call"]["name"] == "Bash"
    image = at["11.1"]["segments"][0]
    assert image["type"] == "image"
    assert image["media"]["data_uri"].startswith("data:image/png;base64,iVBOR")
    assert image["media"]["size_bytes"] > 0
    assert at["21"]["metadata"]["isSidechain"] is True
    # a line without a timestamp before any other: the file's mtime (seed 003's last rule)
    assert at["1"]["source_type"] == "session"
    assert at["1"]["timestamp"].endswith("Z")


def test_usage_is_counted_once_per_message() -> None:
    parsed = parse_file(CLAUDE_FILE)
    assistant: dict[str, dict[str, int]] = {}
    for line in raw_lines():
        if line and line.get("type") == "assistant" and line["message"]["model"] != "<synthetic>":
            assistant[line["message"]["id"]] = line["message"]["usage"]  # the last line wins
    assert [c.message_id for c in parsed.usage] == list(assistant)
    for call in parsed.usage:
        usage = assistant[call.message_id or ""]
        cached = usage["cache_read_input_tokens"]
        written = usage["cache_creation_input_tokens"]
        assert call.input_tokens == usage["input_tokens"] + written + cached
        assert call.cached_input_tokens == cached
        assert call.cache_write_input_tokens == written
        assert call.output_tokens == usage["output_tokens"]
        assert call.total_tokens == call.input_tokens + call.output_tokens
    msg_1 = parsed.usage[0]
    assert msg_1.output_tokens == 42  # the final line of the three that share msg_1
    assert msg_1.latency_ms == 6000  # from the prompt (10:00:00) to its last line
    assert {c.model for c in parsed.usage} == {"claude-sonnet-4-5-20250929", "claude-opus-4-6"}


def test_the_scan_agrees_with_the_parser() -> None:
    parsed = parse_file(CLAUDE_FILE)
    with CLAUDE_FILE.open("rb") as handle:
        scanned = scan_lines(handle, str(CLAUDE_FILE))
    assert scanned.kinds == parsed.kinds
    assert scanned.problems == parsed.problems
    assert scanned.usage == parsed.usage
    assert scanned.title == parsed.title


def test_a_session_becomes_a_tree_of_events(db: Database, tmp_path: Path) -> None:
    settings = load_settings(None, overrides={"data_dir": str(tmp_path)})
    agent = AgentStore(db, settings).create(AgentCreate(name="claude-fan", prompt="Hi."))
    summary = Importer(db, "claude", agent_id=agent.id).run([CLAUDE_CORPUS])
    data = summary.as_json()
    assert data["files_by_status"] == {"new": 1}
    assert data["calls"] == 6
    assert data["messages_by_source_type"] == parse_file(CLAUDE_FILE).kinds
    session = summary.files[0].session_id
    log = EventLog(db)
    trace = log.trace(session)
    by_id = {str(e.id): e for e in trace}
    # the edited prompt (line 13) and the screenshot question (line 11) both answer the
    # "Done" message of line 10 (its second block): the parentUuid tree, not file order
    done = event_id(session, 10, 1)
    assert by_id[event_id(session, 11)].parent_id is not None
    assert str(by_id[event_id(session, 11)].parent_id) == done
    assert str(by_id[event_id(session, 13)].parent_id) == done
    assert by_id[done].content.text == "Done: config.toml holds x = 1."
    failed = by_id[event_id(session, 9)]
    assert failed.type == "tool_result"
    assert failed.content.is_error is True
    assert str(failed.content.tool_call_id) == event_id(session, 8)
    assert [e.type for e in trace if e.type == "user"] == ["user"] * 3  # no injected lines
    usage = [e for e in trace if e.type == "token_usage"]
    assert len(usage) == 6
    assert log.token_totals(session).total_tokens == sum(
        c.total_tokens for c in parse_file(CLAUDE_FILE).usage
    )
    # the synthetic error message has no usage hanging off it
    synthetic = event_id(session, 15)
    assert all(str(e.parent_id) != synthetic for e in usage)
    # memory and analytics
    found = {
        (h.log_type, h.speaker_id, h.content) for h in MemoryManager(db, agent.id).search("YAML")
    }
    assert found == {
        ("speech", "user", "Actually, use YAML instead of TOML."),
        ("speech", agent.id, "Switching to config.yaml."),
    }
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                llm_usage_metrics.c.provider,
                llm_usage_metrics.c.model,
                llm_usage_metrics.c.cost_source,
                llm_usage_metrics.c.cache_write_tokens,
                llm_usage_metrics.c.cache_read_tokens,
                llm_usage_metrics.c.input_tokens,
                llm_usage_metrics.c.output_tokens,
                llm_usage_metrics.c.estimated_cost_usd,
            ).order_by(llm_usage_metrics.c.timestamp)
        ).all()
    assert rows[0][:4] == ("anthropic", "claude-sonnet-4-5-20250929", "pricing", 100)
    for row in rows:  # cache reads at 0.1x, cache writes at 1.25x the input rate
        rate_in, rate_out = (5.0, 25.0) if "opus" in row.model else (3.0, 15.0)
        fresh = row.input_tokens - row.cache_read_tokens - row.cache_write_tokens
        assert row.estimated_cost_usd == pytest.approx(
            (
                fresh * rate_in
                + row.cache_read_tokens * rate_in * 0.1
                + row.cache_write_tokens * rate_in * 1.25
                + row.output_tokens * rate_out
            )
            / 1e6
        )
    assert any(row.cache_read_tokens for row in rows)
    assert rows[4][1:3] == ("claude-opus-4-6", "pricing")  # priced as claude-opus-4.6
    # again: nothing new; appended: only the new lines
    assert Importer(db, "claude", agent_id=agent.id).run([CLAUDE_CORPUS]).as_json()["events"] == 0
    copy = tmp_path / "copy" / CLAUDE_FILE.name
    copy.parent.mkdir()
    shutil.copy(CLAUDE_FILE, copy)
    lines = copy.read_bytes().splitlines(keepends=True)
    copy.write_bytes(b"".join(lines[:12]))
    first = Importer(db, "claude").run([copy]).files[0]
    with copy.open("ab") as handle:
        handle.writelines(lines[12:])
    second = Importer(db, "claude").run([copy]).files[0]
    assert second.status == "appended"
    assert first.calls + second.calls == 6
    whole = {e.type: 0 for e in trace}
    for e in trace:
        whole[e.type] += 1
    split = {e.type: 0 for e in log.trace(first.session_id)}
    for e in log.trace(first.session_id):
        split[e.type] += 1
    assert split == whole
    branch = {str(e.id): e for e in log.trace(first.session_id)}
    assert str(branch[event_id(first.session_id, 13)].parent_id) == event_id(
        first.session_id, 10, 1
    )
    _, transcript = normalized_messages(db, first.session_id)
    assert [m["id"] for m in transcript.messages] == [m["id"] for m in parse_file(copy).messages]
