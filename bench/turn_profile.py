"""Where an agent turn's time goes: bench/engine_turn.py's OpenCrab turn, alone, measured.

Three views of the same turn (user message → a tool call → its result → send_speech):

- `--statements`: the SQL one turn sends, in order, with the transactions' BEGIN and
  COMMIT (PostgreSQL: every statement handed to psycopg; SQLite: every statement SQLite
  runs), and how many there are.
- `--cpu N`: this process's CPU time per turn (p50 and mean of N turns, worker threads
  included), beside what a bare empty write transaction and a hop to a worker thread
  cost, so the turn's figure can be read as "transactions + statements + engine".
- `--phases N`: this process's CPU time per turn in each phase of the turn (mean of N
  turns, worker threads included; nested phases indented under the one holding them), so
  the turn's figure reads as "our code / the database driver / what LangGraph's graph
  does too (the model node, the tool node, writing the step)".
- `--profile N`: cProfile of N turns counting CPU time (not waiting), with the database
  work run on the event loop's thread so one profile holds all of it; the top functions
  by own time (`SORT=cumulative TOP=80` in the environment to sort and cut otherwise).

    python bench/turn_profile.py [--db sqlite|postgresql]
                                 [--statements | --cpu N | --phases N | --profile N]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine_turn import runtime_on, script
from sqlalchemy import event
from tests.fakes.postgres import ENV_URL, postgres_server
from tests.fakes.scripted_provider import ScriptedProvider

from opencrab import offload
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.messages import CliSource, IncomingMessage
from opencrab.store.database import Database

WARM_UP_TURNS = 30


@contextmanager
def database(kind: str) -> Iterator[Database]:
    """A fresh, migrated store: a SQLite file, or a database of a PostgreSQL server."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            db = Database(f"sqlite:///{Path(tmp) / 'opencrab.db'}")
            db.upgrade()
            try:
                yield db
            finally:
                db.close()
            return
        with postgres_server(os.environ.get(ENV_URL)) as server:
            db = Database(server.create_database())
            db.upgrade()
            try:
                yield db
            finally:
                db.close()


async def one_turn(
    runtime: Runtime, provider: ScriptedProvider, agent: Agent, session: str
) -> None:
    """The bench's turn in a session made beforehand (its making is not measured)."""
    provider.outcomes.clear()
    provider.requests.clear()  # the fake's log of requests: kept, it grows the GC's work
    provider.then(*script(), "unused")
    message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
    result = await runtime.engine.process(agent, message, session_id=session)
    assert result.reply == "Hello there!", result


@contextmanager
def statements_sent(db: Database) -> Iterator[list[str]]:
    """Every SQL statement sent to the database while the block runs."""
    sent: list[str] = []
    if db.dialect == "sqlite":  # new connections trace what SQLite runs

        def on_connect(raw: sqlite3.Connection, _record: Any) -> None:
            raw.set_trace_callback(lambda sql: sent.append(" ".join(sql.split())))

        db.engine.dispose()
        event.listen(db.engine, "connect", on_connect)
        try:
            yield sent
        finally:
            event.remove(db.engine, "connect", on_connect)
            db.engine.dispose()
        return
    import psycopg

    originals: list[tuple[Any, str, Callable[..., Any]]] = []
    for cls in (psycopg.Cursor, psycopg.Connection):
        original = cls.execute

        def traced(self: Any, query: Any, *args: Any, _o: Any = original, **kw: Any) -> Any:
            if isinstance(self, psycopg.Cursor):  # Connection.execute goes through one
                sent.append(" ".join(str(query).split()))
            return _o(self, query, *args, **kw)

        originals.append((cls, "execute", original))
        cls.execute = traced  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)


PHASES: list[tuple[str, str, str, str]] = [
    # (label, module, owner ("" for a module function), function); the order printed
    ("turn set-up", "opencrab.core.engine", "_Turn", "__init__"),
    ("context + user message step (worker thread)", "opencrab.core.engine", "_Turn", "_open"),
    ("  context reads and building", "opencrab.core.engine", "", "build_turn_context"),
    ("    system prompt sections", "opencrab.core.turn_context", "", "_sections"),
    ("  user message rows + statements", "opencrab.core.recorder", "TurnRecorder", "user_in"),
    ("model calls (router; LangGraph: model node)", "opencrab.llm.router", "LlmRouter", "chat"),
    ("reply records (held to the next step)", "opencrab.core.recorder", "TurnRecorder", "reply"),
    ("actions (LangGraph: tool node)", "opencrab.actions.base", "ActionRegistry", "dispatch"),
    ("result steps, hop included", "opencrab.core.recorder", "TurnRecorder", "result"),
    ("  transaction (worker thread)", "opencrab.core.recorder", "TurnRecorder", "commit"),
    (
        "    rows + statements (the user step's too)",
        "opencrab.core.recorder",
        "TurnRecorder",
        "write",
    ),
    ("      skill effectiveness", "opencrab.core.turn_actions", "", "fold_turn"),
    ("SQL handed to the driver (anywhere above)", "opencrab.store.prepared", "", "driver_execute"),
]
"""The phases `--phases` times (bench/engine_turn.py's turn: two model calls, two actions)."""


@contextmanager
def phase_timers() -> Iterator[dict[str, float]]:
    """CPU seconds spent in each of PHASES while the block runs (wrappers put in place for
    the while; `driver_execute` is wrapped where its callers look it up too)."""
    import functools
    import importlib

    spent = dict.fromkeys([label for label, *_ in PHASES] + ["TOTAL"], 0.0)
    undo: list[tuple[Any, str, Any]] = []

    def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def atimed(*args: Any, **kwargs: Any) -> Any:
                start = time.process_time()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    spent[label] += time.process_time() - start

            return atimed

        @functools.wraps(fn)
        def stimed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += time.process_time() - start

        return stimed

    def patch(owner: Any, name: str, label: str) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        undo.append((owner, name, original))
        setattr(owner, name, timed(label, original))

    targets = [*PHASES, ("TOTAL", "opencrab.core.engine", "SkillEngine", "process")]
    for label, module_name, owner_name, name in targets:
        module = importlib.import_module(module_name)
        patch(getattr(module, owner_name) if owner_name else module, name, label)
    driver = "SQL handed to the driver (anywhere above)"
    for module_name in ("opencrab.store.bulk", "opencrab.store.repositories.events"):
        module = importlib.import_module(module_name)
        if hasattr(module, "driver_execute"):
            patch(module, "driver_execute", driver)
    try:
        yield spent
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)


async def main(kind: str, statements: bool, cpu: int, profile: int, phases: int = 0) -> None:
    with database(kind) as db:
        async with runtime_on(db) as (runtime, provider):
            agent = runtime.agents.get("bench")
            count = max(cpu, profile, phases, 1)
            sessions = [ensure_chat_session(db, agent.id) for _ in range(count)]
            if statements:
                with statements_sent(db) as sent:
                    await one_turn(runtime, provider, agent, sessions[0])
                for sql in sent:
                    print(sql[:160])
                print(f"{len(sent)} statements in one turn ({kind})")
            if cpu:
                times = []
                for session in sessions[:cpu]:
                    start = time.process_time()
                    await one_turn(runtime, provider, agent, session)
                    times.append(time.process_time() - start)
                print(
                    f"{kind}: CPU per turn p50 {statistics.median(times) * 1000:.2f} ms, "
                    f"mean {statistics.fmean(times) * 1000:.2f} ms ({cpu} turns)"
                )
                print(f"  an empty write transaction: {empty_write_us(db):.0f} µs CPU")
                print(f"  a hop to a worker thread and back: {await hop_us():.0f} µs CPU")
            if phases:
                with phase_timers() as spent:
                    for session in sessions[:phases]:
                        await one_turn(runtime, provider, agent, session)
                print(f"{kind}: CPU per turn by phase (µs, mean of {phases} turns)")
                for label, seconds in spent.items():
                    print(f"  {label:48s} {seconds / phases * 1e6:7.0f}")
            if profile:
                profiler = cProfile.Profile(time.process_time)
                with offload.inline():  # the database work on this thread, in the profile
                    profiler.enable()
                    for session in sessions[:profile]:
                        await one_turn(runtime, provider, agent, session)
                    profiler.disable()
                stats = pstats.Stats(profiler).sort_stats(os.environ.get("SORT", "tottime"))
                stats.print_stats(int(os.environ.get("TOP", "40")))
                if os.environ.get("CALLERS"):  # who calls the functions matching this pattern
                    stats.print_callers(os.environ["CALLERS"])


def empty_write_us(db: Database, rounds: int = 2000) -> float:
    """CPU microseconds of `db.write()` with nothing in it."""
    start = time.process_time()
    for _ in range(rounds):
        with db.write():
            pass
    return (time.process_time() - start) / rounds * 1e6


async def hop_us(rounds: int = 2000) -> float:
    """CPU microseconds of a no-op handed to a worker thread and awaited (run_blocking,
    as the turn hands its database work over)."""
    start = time.process_time()
    for _ in range(rounds):
        await offload.run_blocking(lambda: None)
    return (time.process_time() - start) / rounds * 1e6


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--statements", action="store_true", help="print one turn's SQL")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="CPU per turn")
    parser.add_argument("--phases", type=int, default=0, metavar="N", help="CPU by phase")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile N turns")
    args = parser.parse_args()
    if not (args.statements or args.cpu or args.profile or args.phases):
        args.statements, args.cpu = True, 1000
    asyncio.run(main(args.db, args.statements, args.cpu, args.profile, args.phases))
