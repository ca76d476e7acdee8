"""OpenCode's database as LLM usage: a database with the schema OpenCode 1.18 wrote
(tests/fixtures/opencode/schema.sql), its rows still in the WAL of a writer that is
open, hostile messages among them (not JSON, huge and negative counts, missing fields,
over-long data, no id), and hostile files (not SQLite, no message table, a message
table without its columns, over the limits, a missing folder): every readable call
becomes one metrics row, each unreadable message or file one problem naming it,
OpenCode's files are left as they were, and reading again stores nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from opencrab.importers.common import ReadLimits
from opencrab.importers.opencode import import_usage, read_database, session_id_of
from opencrab.store import Database
from opencrab.store.tables import llm_usage_daily, llm_usage_metrics
from tests.fakes.opencode_store import START_MS, OpenCodeStore, assistant, tokens, user

MiB = 1024 * 1024
LIMITS = ReadLimits(max_bytes=64 * MiB, max_lines=10_000, max_line_bytes=MiB)


def database(folder: Path) -> Path:
    return folder / ".local" / "share" / "opencode" / "opencode.db"


def rows(db: Database) -> list[sa.Row[Any]]:
    m = llm_usage_metrics.c
    query = sa.select(
        m.agent_id, m.session_id, m.provider, m.model, m.purpose, m.task_type,
        m.input_tokens, m.output_tokens, m.total_tokens, m.cache_read_tokens,
        m.cache_write_tokens, m.reasoning_tokens, m.estimated_cost_usd, m.cost_source,
        m.latency_ms, m.status, m.error_type, m.timestamp,
    )  # fmt: skip
    with db.read() as conn:
        return list(conn.execute(query.order_by(m.input_tokens.desc())))


def hostile(store: OpenCodeStore) -> None:
    """One session of OpenCode's messages, readable and not (numbered as read)."""
    ses = store.session("ses_dcc540902ffeR6wrW0YIyTQ4WG")
    store.message(ses, "msg_01", user())  # 1: a user's message
    done = assistant(tokens(1000, 30, reasoning=5, read=200, write=40))
    store.message(ses, "msg_02", done)  # 2: a finished call
    store.message(ses, "msg_03", assistant(tokens(9, 9), completed=None))  # 3: running
    store.message(ses, "msg_04", '{"role": "assistant", "tokens": {"input": 5')  # 4: cut off
    store.message(ses, "msg_05", "[1, 2, 3]")  # 5: not an object
    store.message(ses, "msg_06", assistant(tokens(10**30, 1)))  # 6: huge
    store.message(ses, "msg_07", assistant(tokens(2**40, 1)))  # 7: beyond the column
    store.message(ses, "msg_08", assistant(tokens(3, -3)))  # 8: negative
    store.message(ses, "msg_09", assistant(tokens(True, 1)))  # 9: not a number
    store.message(ses, "msg_10", {**assistant(None), "tokens": {"input": 10}})  # 10
    store.message(ses, "msg_11", {**assistant(None), "tokens": "1200"})  # 11
    store.message(
        ses, "msg_12", {**assistant(None), "tokens": {"input": 1, "output": 1, "cache": 5}}
    )
    store.message(ses, "msg_13", "x" * (2 * MiB))  # 13: over the line limit
    store.message(ses, None, assistant(tokens(9, 9)))  # 14: no id
    store.message(ses, "msg_15", assistant(tokens(2**31 - 1, 1)))  # 15: more than a count
    failed = assistant(tokens(50, 2), completed=None, error={"name": "APIError", "data": {}})
    store.message(ses, "msg_16", failed)  # 16: failed after spending tokens
    store.message(ses, "msg_17", assistant(tokens(0, 0), error={"name": "APIError"}))  # 17
    store.message(ses, "msg_18", 42)  # 18: data not text
    priced = assistant(tokens(300, 20), provider="openai", model="gpt-5-mini", cost=99.0)
    store.message(ses, "msg_19", priced)  # 19: the table's price wins
    other = assistant(tokens(100, 10), provider="elsewhere", model="mystery", cost=0.5)
    store.message(ses, "msg_20", other)  # 20: OpenCode's own cost
    absurd = assistant(tokens(100, 10), provider="elsewhere", model="odd", cost=1e300)
    store.message(ses, "msg_21", absurd)  # 21: a cost nobody charges, ignored
    when = assistant(tokens(60, 6), created=-5, completed=10**20)  # 22: times out of range
    store.message(ses, "msg_22", when)


def test_a_hostile_database_loses_no_readable_call_and_names_each_bad_message(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    path = database(tmp_path)
    store = OpenCodeStore(path)  # OpenCode still running: its rows are in the WAL
    hostile(store)
    wal = path.with_name("opencode.db-wal")
    before = (path.read_bytes(), wal.read_bytes())
    assert len(before[1]) > len(before[0])  # not checkpointed: immutable would miss it

    found = read_database(path, LIMITS)
    reasons = {p.line: p.reason for p in found.problems}
    assert all(p.file == str(path) for p in found.problems)
    assert reasons.pop(4).startswith("message 'msg_04': not JSON: ")
    assert reasons == {
        5: "message 'msg_05': data is list, not a JSON object",
        6: "message 'msg_06': tokens.input = 1e+30 is not a token count",
        7: "message 'msg_07': tokens.input = 1099511627776 is not a token count",
        8: "message 'msg_08': tokens.output = -3 is not a token count",
        9: "message 'msg_09': tokens.input = True is not a token count",
        10: "message 'msg_10': tokens without output",
        11: "message 'msg_11': tokens is str, not an object",
        12: "message 'msg_12': tokens.cache is int, not an object",
        13: f"message 'msg_13': data of {2 * MiB} characters, skipped",
        14: "message None: has no id, so its tokens are not counted",
        15: "message 'msg_15': 2147483648 tokens in one call is not a count",
        18: "message 'msg_18': data is int, not a JSON object",
    }
    assert list(found.calls) == ["msg_02", "msg_16", "msg_19", "msg_20", "msg_21", "msg_22"]

    done = import_usage(db, [tmp_path / ".local"], agent_id=agent_id, limits=LIMITS)
    assert (done.files, done.calls, len(done.problems)) == (1, 6, 13)
    assert (path.read_bytes(), wal.read_bytes()) == before  # OpenCode's files untouched
    session_id = session_id_of("ses_dcc540902ffeR6wrW0YIyTQ4WG")
    first, second, third, fourth, odd_times, fifth = rows(db)
    # input includes the cache reads and writes, output the reasoning
    assert tuple(first)[:16] == (
        agent_id, session_id, "opencrab", "gpt-4.1", "import", "opencode",
        1240, 35, 1275, 200, 40, 5, 0.0, "unknown", 1300, "ok",
    )  # fmt: skip
    assert first.timestamp.timestamp() * 1000 == START_MS + 2300  # its completion
    assert tuple(second)[2:4] == ("openai", "gpt-5-mini")
    assert (second.estimated_cost_usd, second.cost_source) == (
        (300 * 0.25 + 20 * 2.00) / 1e6,
        "pricing",
    )
    assert {(r.model, r.estimated_cost_usd, r.cost_source) for r in (third, fourth)} == {
        ("mystery", 0.5, "provider"),
        ("odd", 0.0, "unknown"),
    }
    assert (fifth.input_tokens, fifth.status, fifth.error_type) == (50, "error", "APIError")
    assert fifth.latency_ms == 0  # never completed
    # the message's creation as OpenCode stored it, when its own times are no times
    assert odd_times.timestamp.timestamp() * 1000 == START_MS + 22
    assert odd_times.latency_ms == 0

    # read again, and after OpenCode added a call: only the new one is stored
    assert import_usage(db, [path], agent_id=agent_id, limits=LIMITS).calls == 0
    store.message("ses_dcc540902ffeR6wrW0YIyTQ4WG", "msg_23", assistant(tokens(7, 3)))
    grown = import_usage(db, [path], agent_id=agent_id, limits=LIMITS)
    assert (grown.files, grown.calls) == (1, 1)
    store.close()
    assert import_usage(db, [path], agent_id=agent_id, limits=LIMITS).calls == 0  # checkpointed
    assert len(rows(db)) == 7
    with db.read() as conn:
        day = sa.select(
            sa.func.sum(llm_usage_daily.c.calls), sa.func.sum(llm_usage_daily.c.input_tokens)
        )
        assert tuple(conn.execute(day).one()) == (7, 1240 + 300 + 100 + 100 + 60 + 50 + 7)


def test_a_database_that_cannot_be_read_is_a_problem_and_loses_nothing_stored(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    good = database(tmp_path / "good")
    store = OpenCodeStore(good)
    store.message(store.session("ses_a"), "msg_a", assistant(tokens(10, 2)))
    store.close()
    assert import_usage(db, [good], agent_id=agent_id).calls == 1

    corrupt = database(tmp_path / "corrupt")
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    not_sqlite = database(tmp_path / "text")
    not_sqlite.parent.mkdir(parents=True)
    not_sqlite.write_text("not a database at all\n" * 100)
    no_table = database(tmp_path / "view")
    view = OpenCodeStore(no_table)
    view.conn.executescript("DROP TABLE part; DROP TABLE message;")
    view.conn.execute("CREATE VIEW message AS SELECT 1 AS id")
    view.close()
    no_data = database(tmp_path / "columns")
    columns = OpenCodeStore(no_data)
    columns.conn.executescript(
        "DROP TABLE part; DROP TABLE message; CREATE TABLE message (id text PRIMARY KEY);"
    )
    columns.close()
    good.write_bytes(b"\x00" * 4096)  # the one imported before, overwritten

    done = import_usage(db, [tmp_path, tmp_path / "nowhere"], agent_id=agent_id)

    assert (done.files, done.calls) == (5, 0)
    reasons = {
        (Path(p.file).relative_to(tmp_path).parts[0], p.line): p.reason for p in done.problems
    }
    assert reasons.pop(("corrupt", 0)).startswith("not an OpenCode database: ")
    assert reasons.pop(("good", 0)).startswith("not an OpenCode database: ")
    assert reasons == {
        ("text", 0): "not an OpenCode database: file is not a database",
        ("view", 0): "not an OpenCode database: it has no message table",
        ("columns", 0): "not an OpenCode database: no such column: session_id",
        ("nowhere", 0): "no such file or folder",
    }
    assert [(r.input_tokens, r.output_tokens) for r in rows(db)] == [(10, 2)]  # still there


def test_a_database_over_the_limits_is_refused_whole(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    path = database(tmp_path)
    store = OpenCodeStore(path)
    ses = store.session("ses_a")
    for i in range(50):
        store.message(ses, f"msg_{i:02}", assistant(tokens(1, 1)))
    store.message(ses, "msg_long", {**user(), "text": "x" * (3 * MiB // 2)})
    store.close()

    few = import_usage(db, [path], agent_id=agent_id, limits=ReadLimits(max_lines=40))
    small = import_usage(db, [path], agent_id=agent_id, limits=ReadLimits(max_bytes=MiB))

    assert (few.files, few.calls, small.calls) == (1, 0, 0)
    assert [str(p) for p in few.problems + small.problems] == [
        f"{path}:0: more than 40 messages; not imported (the limit is [imports] max_lines)",
        f"{path}:0: more than 1 MB with its WAL; not imported "
        "(the limit is [imports] max_decompressed_mb)",
    ]
    assert rows(db) == []
    assert import_usage(db, [path], agent_id=agent_id).calls == 50  # within the defaults
