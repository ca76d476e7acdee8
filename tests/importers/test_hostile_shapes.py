"""Lines whose fields have the wrong JSON type, nest too deeply, or are real lines with
random fields replaced: every reader keeps going, reports the line, and the import
stores what it can (issue 6, robustness)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from opencrab.event_log import EventLog
from opencrab.importers import claude, codex, codex_scan
from opencrab.importers.common import (
    DEEP_LINE_BYTES,
    MAX_DEPTH,
    UNREADABLE,
    Transcript,
    json_lines,
    json_of,
)
from opencrab.importers.sessions import normalized_messages
from opencrab.importers.store import Importer, session_id_for
from opencrab.store import Database
from tests.fakes.corpora import CLAUDE_FILES, CODEX_FILES, jsonl_lines, response_item

TS = "2026-02-23T10:00:00.000Z"


def both(source: str, raw: list[bytes]) -> tuple[Transcript, Transcript]:
    """The lines normalized (as the API reads them) and scanned (as the import does)."""
    if source == "codex":
        return codex.parse_lines(raw, "f.jsonl"), codex_scan.scan_lines(raw, "f.jsonl")
    return claude.parse_lines(raw, "f.jsonl"), claude.scan_lines(raw, "f.jsonl")


def agree(parsed: Transcript, scanned: Transcript) -> None:
    assert parsed.kinds == scanned.kinds
    assert sorted(map(repr, parsed.problems)) == sorted(map(repr, scanned.problems))
    assert [u.line for u in parsed.usage] == [u.line for u in scanned.usage]
    assert not [p for p in parsed.problems + scanned.problems if UNREADABLE in p.reason]
    orjson.dumps(parsed.messages)  # what GET …/messages sends


def write(tmp_path: Path, name: str, raw: list[bytes]) -> Path:
    path = tmp_path / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(raw))
    return path


# ------------------------------------------------------------------ wrong JSON types
def test_codex_fields_of_the_wrong_type_are_reported_and_the_file_imports(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    raw = jsonl_lines(
        {"timestamp": TS, "type": "session_meta", "payload": {"id": "s", "model_provider": {}}},
        {"timestamp": TS, "type": {"nested": "object"}, "payload": {}},
        {"timestamp": TS, "type": ["response_item"], "payload": {}},
        {"timestamp": TS, "type": 7},
        response_item({"type": ["message"], "role": "user"}),
        response_item({"type": "reasoning", "summary": 5}),
        response_item(
            {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": {"x": 1}}
        ),
        response_item({"type": "function_call_output", "call_id": ["c"], "output": "ok"}),
        response_item(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ),
    )
    parsed, scanned = both("codex", raw)
    agree(parsed, scanned)
    problems = {p.line: p.reason for p in parsed.problems}
    assert problems[2] == "unknown event (type {'nested': 'object'}); kept as meta"
    assert problems[3] == "unknown event (type ['response_item']); kept as meta"
    assert problems[4] == "unknown event (type 7); kept as meta"
    assert problems[5] == "unknown response_item type ['message']; kept as meta"
    assert "call_id ['c'] with no call before it" in problems[8]
    assert len(parsed.messages) == len(raw)  # every line kept, as itself or as meta
    reasoning = parsed.messages[5]
    assert reasoning["metadata"]["summary"] == []
    assert parsed.provider is None  # an object is no provider name
    summary = Importer(db, "codex", agent_id=agent_id).run(
        [write(tmp_path, "rollout-x.jsonl", raw)]
    )
    out = summary.as_json()
    assert out["messages"] == len(raw)
    assert out["problems"] == [p.as_json() for p in summary.files[0].problems]
    row, again = normalized_messages(db, summary.files[0].session_id)
    assert row.provider == "openai"  # the source's, as the file names none
    assert len(again.messages) == len(raw)


def test_claude_fields_of_the_wrong_type_are_reported_and_the_file_imports(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    def line(**fields: Any) -> dict[str, Any]:
        return {"timestamp": TS, "sessionId": "s", **fields}

    raw = jsonl_lines(
        line(type={"user": 1}, uuid="u0"),
        line(type=["assistant"], uuid="u1"),
        line(
            type="user",
            uuid={"id": "u2"},
            parentUuid=["u1"],
            message={"role": "user", "content": "hello"},
        ),
        line(
            type="assistant",
            uuid="u3",
            parentUuid={"u": 2},
            message={
                "id": ["m"],
                "model": {"name": "x"},
                "content": [{"type": "tool_use", "id": {"id": 1}, "name": 5, "input": {}}],
                "usage": {"input_tokens": "many"},
            },
        ),
        line(
            type="user",
            uuid="u4",
            parentUuid="u3",
            message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": {}}]},
        ),
    )
    parsed, scanned = both("claude", raw)
    agree(parsed, scanned)
    problems = {p.line: p.reason for p in parsed.problems}
    assert problems[1] == "unknown line ({'user': 1}); kept as meta"
    assert problems[2] == "unknown line (['assistant']); kept as meta"
    assert "tool_use_id {} with no tool_use before it" in problems[5]
    assert parsed.kinds == {"meta": 2, "message": 1, "tool_call": 1, "tool_result": 1}
    assert parsed.usage == []  # no usable message id or numbers
    summary = Importer(db, "claude", agent_id=agent_id).run([write(tmp_path, "s.jsonl", raw)])
    assert summary.as_json()["messages"] == 5
    assert summary.files[0].events == 2  # the user's hello and the tool call


# ------------------------------------------------------------------ nesting
def test_json_nested_too_deeply_is_reported_or_kept_as_text(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    deep_text = "[" * (MAX_DEPTH + 50) + "]" * (MAX_DEPTH + 50)
    raw = jsonl_lines(
        response_item(
            {"type": "function_call", "name": "shell", "arguments": deep_text, "call_id": "c"}
        ),
        response_item({"type": "function_call_output", "call_id": "c", "output": deep_text}),
        response_item({"type": "custom_tool_call", "name": "x", "input": json.loads(deep_text)}),
        response_item(
            {"type": "function_call", "name": "ok", "arguments": '[[["fine"]]]', "call_id": "d"}
        ),
    )
    parsed, scanned = both("codex", raw)
    agree(parsed, scanned)
    assert [(p.line, p.reason) for p in parsed.problems] == [
        (3, f"JSON nested deeper than {MAX_DEPTH} levels")
    ]
    call, result, fine = parsed.messages
    assert call["tool_call"]["arguments"] == deep_text  # kept as the text it was
    assert call["tool_call"]["arguments_json"] is None
    assert result["tool_call"]["output_json"] is None
    assert fine["tool_call"]["arguments_json"] == [[["fine"]]]
    path = write(tmp_path, "rollout-deep.jsonl", raw)
    summary = Importer(db, "codex", agent_id=agent_id).run([path])
    assert summary.files[0].events == 3  # the call, its result and the fine call
    assert summary.files[0].session_id == session_id_for("codex", path.resolve())


def test_the_shortest_lines_past_the_depth_limit_are_reported() -> None:
    def nested(levels: int) -> bytes:  # an object holding `levels` lists, the last a number's
        return b'{"a":' + b"[" * levels + b"0" + b"]" * levels + b"}\n"

    at_limit, past = nested(MAX_DEPTH - 1), nested(MAX_DEPTH)
    assert len(past) < DEEP_LINE_BYTES + 10  # as short as such a line can be, near enough
    result = Transcript("f.jsonl")
    brackets = b'{"a":"' + b"[{" * MAX_DEPTH + b'"}\n'  # a string of brackets: no nesting
    kept = [index for index, _ in json_lines([at_limit, past, brackets], result, 0)]
    assert kept == [0, 2]
    assert [(p.line, p.reason) for p in result.problems] == [
        (2, f"JSON nested deeper than {MAX_DEPTH} levels")
    ]


# ------------------------------------------------------------------ mutated real lines
CHOICES: list[Any] = [
    None,
    0,
    -1,
    2**70,
    1.5,
    "",
    "x" * 3000,
    "2026-13-45T99:99:99Z",
    "<script>alert(1)</script><p>hi</p>",
    [],
    {},
    [1, {"a": None}],
    {"type": None},
    True,
    "[" * 300 + "]" * 300,
    *codex.KNOWN_EVENT_TYPES,
    *codex.LEGACY_ITEM_TYPES,
    "token_count",
    "user",
    "assistant",
    "summary",
    "tool_use",
    "tool_result",
    "text",
    "image",
    "thinking",
    "redacted_thinking",
    "input_text",
    "output_text",
    {"total_token_usage": {"input_tokens": 5}},
]


def mutate(value: Any, rng: random.Random) -> Any:
    """`value` with one field, somewhere in it, replaced by a value of another shape or
    deleted."""
    places: list[tuple[Any, Any]] = []
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        keys = node.keys() if isinstance(node, dict) else range(len(node))
        for key in keys:
            places.append((node, key))
            if isinstance(node[key], dict | list):
                stack.append(node[key])
    if not places:
        return copy.deepcopy(rng.choice(CHOICES))
    node, key = rng.choice(places)
    if isinstance(node, dict) and rng.random() < 0.15:
        del node[key]
    else:
        node[key] = copy.deepcopy(rng.choice(CHOICES))
    return value


def mutated_files(sources: list[Path], seed: int, cases: int) -> list[list[bytes]]:
    real = [line for path in sources for line in path.read_bytes().splitlines() if line.strip()]
    rng = random.Random(seed)
    files = []
    for _ in range(cases):
        start = rng.randrange(len(real))
        out = []
        for line in real[start : start + 30]:
            try:
                value = json.loads(line)
            except ValueError:  # the fixtures' own broken lines stay as they are
                out.append(line + b"\n")
                continue
            for _ in range(rng.randint(0, 3)):
                value = mutate(value, rng)
            out.append(json.dumps(value).encode() + b"\n")
        files.append(out)
    return files


@pytest.mark.parametrize(
    ("source", "sources", "name"),
    [("codex", CODEX_FILES, "rollout-m.jsonl"), ("claude", CLAUDE_FILES, "m.jsonl")],
)
def test_real_lines_with_random_fields_replaced_import_and_read_back(
    source: str, sources: list[Path], name: str, db: Database, agent_id: str, tmp_path: Path
) -> None:
    assert sources
    for case, raw in enumerate(mutated_files(sources, seed=len(source), cases=300)):
        parsed, scanned = both(source, raw)
        agree(parsed, scanned)
        if source == "codex":  # one message per line, or a problem saying why not
            unread = {p.line for p in parsed.problems if "kept as meta" not in p.reason}
            unread -= {p.line for p in parsed.problems if "no call before it" in p.reason}
            assert len(parsed.messages) + len(unread) == len(raw), case
        path = write(tmp_path / str(case), name, raw)
        summary = Importer(db, source, agent_id=agent_id).run([path]).as_json()
        assert summary["messages"] == sum(parsed.kinds.values()), case
        _, again = normalized_messages(db, summary["sessions"][0]["id"])
        assert len(again.messages) == len(parsed.messages), case
        # every stored event is a valid seed-000 AgentEvent (token counts 0..2**31-1)
        assert len(EventLog(db).trace(summary["sessions"][0]["id"])) == summary["events"], case


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[REDACTED_ARGUMENTS len=456 sha=df6be51a]", None),  # a redacted corpus' arguments
        ("[x]", None),
        ("{x: 1}", None),
        ("{'a': 1}", None),
        ("[", None),
        ("{", None),
        ("  [ 1, 2 ]", [1, 2]),
        ('{ "a": [true, null] }', {"a": [True, None]}),
        ("[]", []),
        ("{}", {}),
        ("[-1]", [-1]),
        ('["a"]', ["a"]),
        ("[[{}]]", [[{}]]),
        ("[" + " " * 40 + "1]", [1]),  # past the look-ahead: orjson decides
        ("[" + " " * 40 + "x]", None),
        ("plain text", None),
    ],
)
def test_json_of_tells_json_text_from_text_that_only_starts_like_it(
    text: str, expected: object
) -> None:
    assert json_of(text) == expected
