"""The Codex rollout parser over the shared corpus (six real, redacted files), hand-made
legacy files and hostile input."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from opencrab.importers import common
from opencrab.importers.codex import find_rollouts, parse_file, parse_lines
from tests.fakes.corpora import CODEX_CORPUS, CODEX_FILES, jsonl_lines, last_total, response_item


def expected_kinds(path: Path) -> Counter[str]:
    """source_type counts worked out from the raw lines, independently of the parser."""
    kinds: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        kind, item = event["type"], event["payload"].get("type")
        if kind == "session_meta":
            kinds["session"] += 1
        elif kind == "response_item" and item == "message":
            kinds["message"] += 1
        elif kind == "response_item" and item.endswith("_output"):
            kinds["tool_result"] += 1
        elif kind == "response_item" and item.endswith("call"):
            kinds["tool_call"] += 1
        else:
            kinds["meta"] += 1
    return kinds


def test_the_corpus_has_six_files() -> None:
    assert len(CODEX_FILES) == 6
    found, problems = find_rollouts([CODEX_CORPUS])
    assert found == CODEX_FILES
    assert problems == []


@pytest.mark.parametrize("path", CODEX_FILES, ids=lambda p: p.name[8:27])
def test_every_line_of_a_real_rollout_is_normalized(path: Path) -> None:
    parsed = parse_file(path)
    assert parsed.problems == []
    assert parsed.lines == len(parsed.messages)  # one record per line
    assert Counter(m["source_type"] for m in parsed.messages) == expected_kinds(path)
    assert parsed.session_id
    assert path.name.endswith(f"{parsed.session_id}.jsonl")
    assert parsed.model == "gpt-5.3-codex"
    assert parsed.provider == "openai"
    ids = [m["id"] for m in parsed.messages]
    assert len(set(ids)) == len(ids)
    assert ids[0] == f"{parsed.messages[0]['timestamp']}#1"
    assert all(m["raw"]["file_path"] == str(path) for m in parsed.messages)

    calls = {
        m["tool_call"]["call_id"]: m for m in parsed.messages if m["source_type"] == "tool_call"
    }
    for result in (m for m in parsed.messages if m["source_type"] == "tool_result"):
        call = calls[result["tool_call"]["call_id"]]  # every output joins its call
        assert result["tool_call"]["name"] == call["tool_call"]["name"]
        assert call["tool_call"]["output"] == result["tool_call"]["output"]

    total = last_total(path)
    assert parsed.total_usage is not None
    assert parsed.total_usage["total_tokens"] == total
    assert sum(u.total_tokens for u in parsed.usage) == total  # no snapshot counted twice


def test_token_counts_skip_repeats_and_nulls_across_the_corpus() -> None:
    parsed = [parse_file(p) for p in CODEX_FILES]
    snapshots = sum(
        1
        for r in parsed
        for m in r.messages
        if (m.get("metadata") or {}).get("event_kind") == "token_count"
        and m["metadata"]["token_count"]
    )
    counted = sum(len(r.usage) for r in parsed)
    assert snapshots == 965  # as SOURCE.md observed
    assert counted == 965 - 480  # 480 repeat the previous cumulative total
    for call in (u for r in parsed for u in r.usage):
        assert call.cached_input_tokens <= call.input_tokens  # cached is inside input
        assert call.reasoning_output_tokens <= call.output_tokens
        assert call.total_tokens == call.input_tokens + call.output_tokens


def test_reasoning_is_kept_encrypted_and_shown_as_a_hash() -> None:
    parsed = parse_file(CODEX_FILES[0])
    reasoning = [m for m in parsed.messages if m["raw"]["payload_type"] == "reasoning"]
    assert reasoning
    for message in reasoning:
        assert message["segments"] == []
        secret = message["raw"]["encrypted_content"]
        assert message["raw"]["encrypted_sha256"] == hashlib.sha256(secret.encode()).hexdigest()


# ------------------------------------------------------------------ hand-made input
def test_hostile_lines_are_reported_and_the_rest_imported() -> None:
    parsed = parse_lines(
        jsonl_lines(
            response_item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                }
            ),
            b"{not json",
            b"[1, 2]",
            b"",
            {"timestamp": "2026-02-23T10:00:01Z", "type": "hologram", "payload": {"x": 1}},
            response_item({"type": "teleport", "to": "mars"}),
            response_item({"type": "function_call_output", "call_id": "nobody", "output": "?"}),
            b'{"timestamp": "2026-02-23T10:00:02Z", "type": "event_msg", "payl',
            end=b"",
        ),
        "f.jsonl",
    )
    problems = {p.line: p.reason for p in parsed.problems}
    assert "not valid JSON" in problems[2]
    assert "not an object" in problems[3]
    assert "unknown event (hologram)" in problems[5]
    assert "unknown response_item type 'teleport'" in problems[6]
    assert "no call before it" in problems[7]
    assert "truncated last line" in problems[8]
    assert parsed.blank_lines == 1
    kept = {m["raw"]["line_index"] + 1 for m in parsed.messages}
    assert kept == {1, 5, 6, 7}  # unknown types are kept as meta…
    hologram = next(m for m in parsed.messages if m["raw"]["line_index"] == 4)
    assert hologram["role"] == "meta"
    assert "payload" not in hologram["raw"]  # …with the SHA-256 of the line, not its text
    assert len(hologram["raw"]["payload_sha256"]) == 64
    accounted = (
        len(parsed.messages)
        + len([p for p in parsed.problems if p.line not in kept])
        + parsed.blank_lines
    )
    assert accounted == parsed.lines == 8


def test_a_huge_line_is_reported_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "MAX_LINE_BYTES", 1000)
    big = response_item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x" * 5000}]}
    )
    parsed = parse_lines(
        jsonl_lines(big, response_item({"type": "message", "role": "assistant", "content": []})),
        "f",
    )
    assert "too long" in parsed.problems[0].reason
    assert len(parsed.messages) == 1


def test_injected_context_is_not_a_user_message_and_html_is_sanitised() -> None:
    parsed = parse_lines(
        jsonl_lines(
            response_item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "<environment_context>\n<cwd>/x</cwd>"}
                    ],
                }
            ),
            response_item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /x"}],
                }
            ),
            response_item(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "<strong>ok</strong><script>x()</script>"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                    ],
                }
            ),
            response_item(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "rules"}],
                }
            ),
        ),
        "f",
    )
    env, agents_md, reply, developer = parsed.messages
    assert (env["role"], env["metadata"]["injected"]) == ("system", "environment_context")
    assert (agents_md["role"], agents_md["metadata"]["injected"]) == ("system", "agents_md")
    assert reply["segments"][0] == {
        "channel": "output",
        "type": "text",
        "format": "output_text",
        "text": "<strong>ok</strong>&lt;script&gt;x()&lt;/script&gt;",  # shown, never run
        "annotations": [],
    }
    image = reply["segments"][1]
    assert (image["channel"], image["type"], image["media"]["size_bytes"]) == ("input", "image", 3)
    assert developer["role"] == "system"


def test_tool_arguments_are_parsed_when_they_parse() -> None:
    parsed = parse_lines(
        jsonl_lines(
            response_item(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": '{"cmd": ["ls"]}',
                    "call_id": "c1",
                }
            ),
            response_item(
                {
                    "type": "custom_tool_call",
                    "name": "apply_patch",
                    "input": "*** Begin Patch",
                    "call_id": "c2",
                    "status": "completed",
                }
            ),
            response_item(
                {"type": "function_call_output", "call_id": "c1", "output": '{"output": "a\\n"}'}
            ),
            response_item({"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"}),
        ),
        "f",
    )
    shell, patch, shell_out, patch_out = parsed.messages
    assert shell["tool_call"]["arguments_json"] == {"cmd": ["ls"]}
    assert patch["tool_call"]["input_json"] is None
    assert patch["tool_call"]["input"] == "*** Begin Patch"
    assert shell_out["tool_call"]["output_json"] == {"output": "a\n"}
    assert (patch_out["tool_call"]["name"], patch_out["tool_call"]["status"]) == (
        "apply_patch",
        "completed",
    )


def test_legacy_rollouts_get_timestamps_by_the_seed_rules(tmp_path: Path) -> None:
    legacy = [
        {"id": "legacy-1", "timestamp": "2025-08-01T09:00:00Z", "instructions": "be good"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "yo"}],
        },
    ]
    parsed = parse_lines(jsonl_lines(*legacy), "old.jsonl")
    assert parsed.legacy
    assert parsed.session_id == "legacy-1"
    assert parsed.problems == []
    header, state, user, _call, output, reply = parsed.messages
    assert header["source_type"] == "session"
    assert "instructions" not in header["metadata"]
    assert state["metadata"]["event_kind"] == "legacy_state"
    assert (user["source_type"], user["role"]) == ("legacy", "user")
    assert user["timestamp"] == "2025-08-01T09:00:02.000Z"  # start + 1 s per line
    assert reply["id"] == "2025-08-01T09:00:05.000Z#6"
    assert output["tool_call"]["name"] == "shell"

    no_time = tmp_path / "rollout-old.jsonl"
    no_time.write_bytes(b"".join(jsonl_lines({"id": "legacy-2", "instructions": ""}, legacy[2])))
    os.utime(no_time, (1_700_000_000, 1_700_000_000))
    fallback = parse_file(no_time)
    assert fallback.messages[1]["timestamp"] == "2023-11-14T22:13:21.000Z"  # mtime + 1 s


def test_zstd_files_read_like_plain_ones(tmp_path: Path) -> None:
    packed = tmp_path / (CODEX_FILES[-1].name + ".zst")
    packed.write_bytes(zstandard.ZstdCompressor().compress(CODEX_FILES[-1].read_bytes()))
    plain, zipped = parse_file(CODEX_FILES[-1]), parse_file(packed)
    assert [m["id"] for m in zipped.messages] == [m["id"] for m in plain.messages]
    assert zipped.total_usage == plain.total_usage
    found, _ = find_rollouts([tmp_path])
    assert found == [packed]


def test_new_lines_of_an_appended_file_parse_alone(tmp_path: Path) -> None:
    whole = parse_file(CODEX_FILES[0])
    half = whole.lines // 2
    rest = parse_file(CODEX_FILES[0], skip_lines=half)
    assert [m["id"] for m in rest.messages] == [m["id"] for m in whole.messages[half:]]
    assert rest.model == whole.model
    assert rest.total_usage == whole.total_usage
    counted_before = sum(1 for u in whole.usage if u.line <= half)
    assert len(rest.usage) == len(whole.usage) - counted_before  # nothing counted twice


def test_missing_paths_are_reported(tmp_path: Path) -> None:
    fifo = tmp_path / "rollout-fifo.jsonl"
    os.mkfifo(fifo)  # would block a reader forever
    (tmp_path / "rollout-dangling.jsonl").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path)
    found, problems = find_rollouts(["/no/such/place", fifo, tmp_path])
    assert found == []
    assert [p.reason for p in problems] == ["no such file or folder", "not a file or folder"]


def test_legacy_message_records_become_legacy_messages_with_role_and_text() -> None:
    from opencrab.importers.codex_scan import scan_lines

    raw = jsonl_lines(
        {"id": "legacy-3", "timestamp": "2025-08-01T09:00:00Z", "instructions": ""},
        {"record_type": "message", "role": "user", "text": "fix the bug"},
        {"record_type": "message", "role": "assistant", "text": "done"},
        {"record_type": "message", "text": "and the tests?"},  # no role: the order tells
        {"record_type": "message", "role": "assistant"},  # no text: reported
        {"record_type": "state"},
    )
    parsed = parse_lines(raw, "old.jsonl")
    _, user, reply, inferred, empty, state = parsed.messages
    assert (user["role"], user["source_type"]) == ("user", "legacy")
    assert user["segments"] == [
        {
            "channel": "input",
            "type": "text",
            "format": "text",
            "text": "fix the bug",
            "annotations": [],
        }
    ]
    assert (reply["role"], reply["segments"][0]["channel"]) == ("assistant", "output")
    assert reply["segments"][0]["text"] == "done"
    assert (inferred["role"], inferred["segments"][0]["text"]) == ("user", "and the tests?")
    assert (empty["role"], empty["source_type"], empty["segments"]) == ("assistant", "legacy", [])
    assert state["source_type"] == "meta"
    assert parsed.title == "fix the bug"
    assert [(p.line, p.reason) for p in parsed.problems] == [
        (5, "legacy message without text (text None); kept with no segments")
    ]
    scanned = scan_lines(raw, "old.jsonl")
    assert scanned.kinds == parsed.kinds == {"session": 1, "legacy": 4, "meta": 1}
    assert scanned.problems == parsed.problems
    assert scanned.title == parsed.title
    assert [(e.kind, e.text) for e in scanned.entries] == [
        ("user", "fix the bug"),
        ("assistant", "done"),
        ("user", "and the tests?"),
        ("assistant", ""),
    ]


def test_custom_tool_calls_keep_status_and_input_under_tool_call() -> None:
    from opencrab.importers.codex_scan import scan_lines

    raw = jsonl_lines(
        response_item(
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": "c2",
                "status": "completed",
            }
        ),
        response_item({"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"}),
    )
    call, _ = parse_lines(raw, "f").messages
    assert call["tool_call"] == {
        "call_id": "c2",
        "name": "apply_patch",
        "status": "completed",
        "input": "*** Begin Patch",
        "input_json": None,
        "output": "Done!",
        "output_json": None,
    }
    tool_call = scan_lines(raw, "f").entries[0]
    assert (tool_call.name, tool_call.arguments) == ("apply_patch", "*** Begin Patch")
