"""Gemini CLI's chat recordings as LLM usage: the lines as Gemini CLI 0.61 writes them
(metadata, `$set`, a model reply written again with its tokens and its tool calls, a
rewind), hostile ones among them (not JSON, huge and negative counts, missing fields, an
over-long line), a file refused whole, and an older version's `.json`: every readable
reply becomes one metrics row, each unreadable line one problem naming it, and reading
again stores nothing twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from opencrab.importers.common import ReadLimits
from opencrab.importers.gemini import import_usage, read_chat
from opencrab.importers.store import session_id_for
from opencrab.store import Database
from opencrab.store.tables import llm_usage_daily, llm_usage_metrics

MiB = 1024 * 1024


def reply(message_id: str | None, model: str = "gemini-3-pro", **tokens: Any) -> dict[str, Any]:
    """A model reply as ChatRecordingService writes it (tokens only when given)."""
    message: dict[str, Any] = {
        "timestamp": "2026-11-27T22:35:01.546Z",
        "type": "gemini",
        "content": "",
        "thoughts": [],
        "model": model,
    }
    if message_id is not None:
        message["id"] = message_id
    if tokens:
        message["tokens"] = tokens
    return message


def counts(input: Any, output: Any, **rest: Any) -> dict[str, Any]:
    return {"input": input, "output": output, "cached": 0, "thoughts": 0, "tool": 0, **rest}


def user(message_id: str, at: str) -> dict[str, Any]:
    return {"id": message_id, "timestamp": at, "type": "user", "content": [{"text": "go"}]}


def write_chat(
    folder: Path, lines: list[Any], name: str = "session-2026-11-27T22-34-a.jsonl"
) -> Path:
    chats = folder / ".gemini" / "tmp" / "project" / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / name
    path.write_bytes(
        b"".join(x if isinstance(x, bytes) else json.dumps(x).encode() + b"\n" for x in lines)
    )
    return path


def rows(db: Database) -> list[sa.Row[Any]]:
    m = llm_usage_metrics.c
    query = sa.select(
        m.agent_id, m.session_id, m.provider, m.model, m.purpose, m.task_type,
        m.input_tokens, m.output_tokens, m.total_tokens, m.cache_read_tokens,
        m.reasoning_tokens, m.estimated_cost_usd, m.cost_source, m.latency_ms,
    )  # fmt: skip
    with db.read() as conn:
        return list(conn.execute(query.order_by(m.input_tokens.desc())))


HOSTILE = [
    {
        "sessionId": "s1",
        "projectHash": "p",
        "startTime": "2026-11-27T22:34:58.869Z",
        "kind": "main",
    },
    {"$set": {"messages": [user("ctx", "2026-11-27T22:34:58.879Z")]}},
    user("u1", "2026-11-27T22:35:00.046Z"),
    reply("r1"),  # 4: no tokens yet
    reply("r1", **counts(1200, 35)),  # 5: its tokens
    {**reply("r1", **counts(1200, 35)), "toolCalls": [{"id": "c1", "name": "run_shell_command"}]},
    b'{"id": "r2", "type": "gemini", "tokens": {"input": 5\n',  # 7: cut off, not JSON
    reply("r3", **counts(10**30, 1)),  # 8: a huge number (a float once parsed)
    reply("r4", **counts(2**40, 1)),  # 9: a whole number beyond the column
    reply("r5", **counts(-3, 1)),  # 10: negative
    reply("r6", **counts(True, 1)),  # 11: not a number
    {**reply("r7"), "tokens": {"input": 10}},  # 12: no output count
    {**reply("r8"), "tokens": "1200"},  # 13: tokens not an object
    reply(None, **counts(9, 9)),  # 14: no id
    [1, 2, 3],  # 15: not an object
    b"x" * (2 * MiB) + b"\n",  # 16: over-long
    reply("r9", model="gemini-3-flash", **counts(400, 20, cached=100, thoughts=7, tool=3)),
    {"$rewindTo": "r9"},  # 18: rewound, but its tokens were spent
    {"$set": {"lastUpdated": "2026-11-27T22:35:07.791Z"}},
]


def test_a_hostile_chat_loses_no_readable_reply_and_names_each_bad_line(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    path = write_chat(tmp_path, HOSTILE)
    limits = ReadLimits(max_bytes=64 * MiB, max_lines=10_000, max_line_bytes=MiB)

    chat = read_chat(path, limits)
    reasons = {p.line: p.reason for p in chat.problems}
    assert all(p.file == str(path) for p in chat.problems)
    assert reasons[7].startswith("not JSON: ")
    assert reasons[8] == "model message 'r3': tokens.input = 1e+30 is not a token count"
    assert reasons[9] == "model message 'r4': tokens.input = 1099511627776 is not a token count"
    assert reasons[10] == "model message 'r5': tokens.input = -3 is not a token count"
    assert reasons[11] == "model message 'r6': tokens.input = True is not a token count"
    assert reasons[12] == "model message 'r7': tokens without output"
    assert reasons[13] == "model message 'r8': tokens is str, not an object"
    assert reasons[14] == "a model message: has no id, so its tokens are not counted"
    assert reasons[15] == "not a JSON object"
    assert reasons[16] == "an over-long line, skipped"
    assert sorted(reasons) == [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert list(chat.calls) == ["r1", "r9"]

    done = import_usage(db, [tmp_path / ".gemini" / "tmp"], agent_id=agent_id, limits=limits)
    assert (done.files, done.calls, len(done.problems)) == (1, 2, 10)
    session_id = session_id_for("gemini", path.resolve())
    first, second = rows(db)
    assert tuple(first)[:-3] == (
        agent_id, session_id, "google", "gemini-3-pro", "import", "gemini",
        1200, 35, 1235, 0, 0,
    )  # fmt: skip
    assert first.latency_ms == 1500  # from the user's message to the reply
    assert (first.estimated_cost_usd, first.cost_source) == (
        (1200 * 2.00 + 35 * 12.00) / 1e6,
        "pricing",
    )
    # input includes the tool-use prompt, output the thoughts; cached is part of input
    assert tuple(second)[3:11] == ("gemini-3-flash", "import", "gemini", 403, 27, 430, 100, 7)
    assert second.cost_source == "pricing"
    assert second.estimated_cost_usd > 0

    # read again, and after the CLI appended a reply: only the new one is stored
    again = import_usage(db, [path], agent_id=agent_id, limits=limits)
    assert again.calls == 0
    with path.open("a") as out:
        out.write(json.dumps(reply("r10", **counts(7, 3))) + "\n")
    grown = import_usage(db, [path], agent_id=agent_id, limits=limits)
    assert (grown.files, grown.calls) == (1, 1)
    assert [(r.input_tokens, r.output_tokens) for r in rows(db)] == [(1200, 35), (403, 27), (7, 3)]
    with db.read() as conn:
        day = sa.select(
            sa.func.sum(llm_usage_daily.c.calls), sa.func.sum(llm_usage_daily.c.input_tokens)
        )
        assert tuple(conn.execute(day).one()) == (3, 1200 + 7 + 403)  # the rollup counted once


def test_a_file_refused_whole_is_a_problem_and_the_others_are_imported(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    good = write_chat(tmp_path, [reply("a", **counts(10, 2))], "session-a.jsonl")
    write_chat(tmp_path, [reply(f"m{i}", **counts(1, 1)) for i in range(50)], "session-b.jsonl")
    legacy = {
        "sessionId": "old",
        "projectHash": "p",
        "messages": [
            user("u", "2026-01-01T00:00:00Z"),
            reply("x", "gemini-2.5-pro", **counts(5, 5)),
        ],
    }
    old = write_chat(tmp_path, [json.dumps(legacy, indent=2).encode()], "session-old.json")
    limits = ReadLimits(max_bytes=64 * MiB, max_lines=40, max_line_bytes=MiB)

    done = import_usage(db, [tmp_path], agent_id=agent_id, limits=limits)

    assert (done.files, done.calls) == (3, 2)
    [problem] = done.problems
    assert (Path(problem.file).name, problem.line) == ("session-b.jsonl", 0)
    assert problem.reason == "more than 40 lines; not imported (the limit is [imports] max_lines)"
    ids = {session_id_for("gemini", p.resolve()) for p in (good, old)}
    got = {(r.session_id, r.model, r.input_tokens, r.cost_source) for r in rows(db)}
    assert got == {
        (session_id_for("gemini", good.resolve()), "gemini-3-pro", 10, "pricing"),
        (session_id_for("gemini", old.resolve()), "gemini-2.5-pro", 5, "unknown"),
    }
    assert {r.session_id for r in rows(db)} == ids


def test_a_missing_folder_is_a_problem_not_an_error(db: Database, tmp_path: Path) -> None:
    done = import_usage(db, [tmp_path / "nowhere"], agent_id=None)
    assert (done.files, done.calls) == (0, 0)
    assert [p.reason for p in done.problems] == ["no such file or folder"]
