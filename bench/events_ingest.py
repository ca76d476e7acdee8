"""Ingest benchmark: import 100k AgentEvents vs raw sqlite3.executemany of the same rows.

Our path is what `opencrab events import` does: parse JSON Lines into validated events,
check every seed-000 rule, and insert in one transaction. The baseline inserts the very
rows our path stores (already serialised) with `sqlite3.executemany` into an identical,
freshly migrated database with the same pragmas. Both run in this process, alternating,
best of several rounds, so machine noise hits both alike.

    python bench/events_ingest.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

from opencrab.event_log import COLUMNS, EventLog
from opencrab.events import (
    AgentEvent,
    MessagePayload,
    ReasoningPayload,
    TokenUsageDetails,
    TokenUsagePayload,
    ToolCallPayload,
    ToolResultPayload,
    UserPayload,
    event_json,
    new_event,
    parse_jsonl,
)
from opencrab.store import Database
from opencrab.store.types import format_timestamp

TARGET_RATIO = 0.3
TARGET_RATE = 30_000


def make_events(n: int) -> list[AgentEvent]:
    """Realistic turns (user, reasoning, call + usage, result, answer + usage), 50 per trace."""
    out: list[AgentEvent] = []
    trace = uuid4()
    parent: AgentEvent | None = None
    i = 0
    while len(out) < n:
        if i % 50 == 0:
            trace, parent = uuid4(), None
        user = new_event(
            trace, UserPayload(text=f"Please look at notes/{i}.md and summarise it."), parent=parent
        )
        thought = new_event(
            trace, ReasoningPayload(text="I should read the file first."), parent=user
        )
        call = new_event(
            trace,
            ToolCallPayload(name="ws_read", arguments={"path": f"notes/{i}.md"}),
            parent=thought,
        )
        call_usage = new_event(
            trace,
            TokenUsagePayload(input_tokens=812, output_tokens=31, total_tokens=843),
            parent=call,
        )
        result = new_event(
            trace,
            ToolResultPayload(output="# Notes\n" + "line of text\n" * 8, tool_call_id=call.id),
            parent=call,
        )
        answer = new_event(
            trace, MessagePayload(text="The notes describe the plan in eight lines."), parent=result
        )
        answer_usage = new_event(
            trace,
            TokenUsagePayload(
                input_tokens=1024,
                output_tokens=42,
                total_tokens=1066,
                details=TokenUsageDetails(cache_read_input_tokens=800, reasoning_output_tokens=12),
            ),
            parent=answer,
            metadata={"finish_reason": "stop"},
        )
        out += [user, thought, call, call_usage, result, answer, answer_usage]
        parent = answer
        i += 1
    return out[:n]  # any prefix of a valid, parent-first batch is valid


def fresh_db(directory: Path, name: str) -> Path:
    path = directory / f"{name}.db"
    db = Database(f"sqlite:///{path}")
    db.upgrade()
    db.close()
    return path


def run_ours(path: Path, data: bytes) -> float:
    db = Database(f"sqlite:///{path}")
    start = time.perf_counter()
    batch = parse_jsonl(data)
    assert not batch.problems, batch.problems[:3]
    EventLog(db).append_many(batch.events)
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed


def run_raw(path: Path, rows: list[tuple[object, ...]]) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = NORMAL")
    sql = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    start = time.perf_counter()
    con.execute("BEGIN IMMEDIATE")
    con.executemany(sql, rows)
    con.execute("COMMIT")
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    events = make_events(args.events)
    data = b"\n".join(event_json(e) for e in events) + b"\n"
    rows = [
        (
            str(e.id),
            str(e.trace_id),
            None if e.parent_id is None else str(e.parent_id),
            e.type,
            format_timestamp(e.timestamp),
            e.content.model_dump_json(),
            None if e.metadata is None else '{"finish_reason":"stop"}',
            str(e.content.tool_call_id) if isinstance(e.content, ToolResultPayload) else None,
        )
        for e in events
    ]
    del events
    gc.collect()
    n = len(rows)
    best_ours = best_raw = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for r in range(args.rounds):
            best_raw = min(best_raw, run_raw(fresh_db(directory, f"raw{r}"), rows))
            best_ours = min(best_ours, run_ours(fresh_db(directory, f"ours{r}"), data))
            gc.collect()
    ours_rate, raw_rate = n / best_ours, n / best_raw
    ratio = ours_rate / raw_rate
    print(f"events: {n:,} ({len(data) / 1e6:.1f} MB of JSON Lines), best of {args.rounds} rounds")
    print(f"opencrab import (parse + validate + insert): {ours_rate:,.0f} events/s")
    print(f"raw sqlite3.executemany (insert only):       {raw_rate:,.0f} events/s")
    print(f"ratio: {ratio:.2f}")
    met = ratio >= TARGET_RATIO and ours_rate >= TARGET_RATE
    verdict = "met" if met else "NOT met"
    print(f"target (ratio >= {TARGET_RATIO}, >= {TARGET_RATE:,} events/s): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
