"""Framework time per agent turn: OpenCrab's SkillEngine vs LangGraph, on SQLite and PostgreSQL.

The same turn in both, with an in-process scripted model (no network, no tokens):
user message → the model calls an action → its result → the model calls send_speech.
That is four recorded steps (user, tool call, tool result, speech).

- OpenCrab: the real engine (context building from the store, tool definitions, action
  validation and dispatch, AgentEvents + memory logs + session messages committed per
  step).
- LangGraph: a StateGraph (model node ⇄ tool node) compiled with its checkpointer for the
  same database, invoked with durability="sync", so every step's checkpoint is written
  before the next.

Two legs, each OpenCrab against LangGraph in the same run:
- SQLite: OpenCrab's store file against SqliteSaver on a file beside it. Both run in WAL
  mode; OpenCrab's store commits with synchronous=NORMAL, SqliteSaver with SQLite's
  default FULL (an fsync per commit) unless --langgraph-sqlite-synchronous NORMAL; the
  modes are printed. Target: OpenCrab >= 2x faster per turn at equal durability (NORMAL),
  >= 5x against SqliteSaver's default FULL.
- PostgreSQL: OpenCrab on `postgresql+psycopg://` against PostgresSaver
  (langgraph-checkpoint-postgres, opened the documented way: `from_conn_string`), each in
  its own database of one server (target: OpenCrab >= 2x faster per turn). The server is
  OPENCRAB_TEST_PG_URL when set, otherwise a throwaway cluster started like the tests'
  (tests/fakes/postgres.py); both sides commit under that server's settings, which are
  printed. Target: OpenCrab >= 1.6x faster per turn.

Each turn starts a new session / thread; the two run alternately, turn by turn, in one
process, so machine noise hits both alike. Prints p50/p95/mean per turn, p50 per step and
the p50 of this process's CPU time per turn (worker threads included; a PostgreSQL
server's own CPU is not) for each side, and the ratio LangGraph / OpenCrab of the p50 per
turn (the targets) and of the CPU time (steadier on a busy machine).

    python bench/engine_turn.py [--turns N] [--only sqlite|postgresql]
                                [--langgraph-sqlite-synchronous NORMAL|FULL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text
from sqlalchemy.engine import make_url
from tests.fakes.postgres import ENV_URL, postgres_server
from tests.fakes.scripted_provider import ScriptedProvider, reply

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ToolCall
from opencrab.messages import CliSource, IncomingMessage
from opencrab.store.database import Database

STEPS_PER_TURN = 4
WARM_UP_TURNS = 20
TARGETS = {"sqlite": 2.0, "postgresql": 1.6}
"""How many times faster than LangGraph (p50 per turn) OpenCrab should be on each database,
at equal durability (issue 33); SQLite against SqliteSaver at its default FULL: 5x."""
SQLITE_FULL_TARGET = 5.0


def script() -> list[Any]:
    return [
        reply(
            tool_calls=[
                ToolCall(
                    id="call_1",
                    name="generate_inner_voice",
                    arguments={"content": "The user greets me; I should answer kindly."},
                )
            ]
        ),
        reply(
            tool_calls=[
                ToolCall(id="call_2", name="send_speech", arguments={"content": "Hello there!"})
            ]
        ),
    ]


# ------------------------------------------------------------------ OpenCrab
async def opencrab_turns(
    runtime: Runtime, provider: ScriptedProvider, turns: int, cpu: list[float] | None = None
) -> list[float]:
    """Run `turns` turns; their wall times (and CPU times of this process into `cpu`)."""
    agent = runtime.agents.get("bench")
    times = []
    for _ in range(turns):
        session = ensure_chat_session(runtime.db, agent.id)
        provider.outcomes.clear()
        provider.requests.clear()  # the fake's log of requests: kept, it grows the GC's work
        provider.then(*script(), "unused")
        message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
        start, cpu_start = time.perf_counter(), time.process_time()
        result = await runtime.engine.process(agent, message, session_id=session)
        times.append(time.perf_counter() - start)
        if cpu is not None:
            cpu.append(time.process_time() - cpu_start)
        assert result.reply == "Hello there!", result
    return times


# ------------------------------------------------------------------ LangGraph
class State(TypedDict):
    messages: list[dict[str, Any]]
    done: bool


def langgraph_graph() -> Any:
    """The same loop as a StateGraph: model node ⇄ tool node until send_speech."""
    from langgraph.graph import END, START, StateGraph

    def model(state: State) -> dict[str, Any]:
        calls = sum(1 for m in state["messages"] if m["role"] == "assistant")
        out = script()[calls]
        call = out.tool_calls[0]
        message = {
            "role": "assistant",
            "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}],
        }
        return {"messages": [*state["messages"], message]}

    def tools(state: State) -> dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        done = call["name"] == "send_speech"
        result = {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'}
        return {"messages": [*state["messages"], result], "done": done}

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_conditional_edges("tools", lambda s: END if s["done"] else "model")
    return graph


@contextmanager
def langgraph_sqlite(
    path: Path, synchronous: str | None
) -> Iterator[tuple[Any, sqlite3.Connection]]:
    """The graph compiled with SqliteSaver on a database file, and its connection;
    `synchronous` overrides SQLite's default (FULL) on that connection."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    try:
        yield langgraph_graph().compile(checkpointer=SqliteSaver(conn)), conn
    finally:
        conn.close()


@contextmanager
def langgraph_postgres(url: str) -> Iterator[Any]:
    """The graph compiled with PostgresSaver on the database at a SQLAlchemy `url`."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(libpq_url(url)) as saver:
        saver.setup()
        yield langgraph_graph().compile(checkpointer=saver)


def libpq_url(url: str) -> str:
    """A SQLAlchemy `postgresql+psycopg://` URL as the libpq URI psycopg connects with."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def langgraph_turn(app: Any, n: int, cpu: list[float] | None = None) -> float:
    """Run one turn on thread `n`; its wall time (and its CPU time into `cpu`)."""
    config = {"configurable": {"thread_id": f"t{n}"}}
    start, cpu_start = time.perf_counter(), time.process_time()
    out = app.invoke(
        {"messages": [{"role": "user", "content": "Hello!"}], "done": False},
        config,
        durability="sync",
    )
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append(time.process_time() - cpu_start)
    assert out["done"]
    return elapsed


# ------------------------------------------------------------------ legs
@dataclass
class Leg:
    database: str
    ours: list[float]
    theirs: list[float]
    ours_cpu: list[float]  # this process's CPU time per turn (threads included)
    theirs_cpu: list[float]
    events: int
    setting: str  # how the database commits, for the reader

    @property
    def ratio(self) -> float:
        return statistics.median(self.theirs) / statistics.median(self.ours)


@asynccontextmanager
async def runtime_on(db: Database) -> AsyncIterator[tuple[Runtime, ScriptedProvider]]:
    """A runtime with the bench's agent and scripted model, warmed up."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "data")
        settings = load_settings()
        provider = ScriptedProvider("openai", "unused")
        router = LlmRouter(settings)
        router.register_provider(provider)
        async with Runtime.open(settings, db=db, router=router) as runtime:
            runtime.agents.create(AgentCreate(name="bench"))
            await opencrab_turns(runtime, provider, WARM_UP_TURNS)
            yield runtime, provider


async def run_leg(database: str, db: Database, app: Any, turns: int, setting: str) -> Leg:
    """Alternate OpenCrab and LangGraph turns (after a warm-up of each) on one database."""
    async with runtime_on(db) as (runtime, provider):
        for n in range(WARM_UP_TURNS):
            langgraph_turn(app, -n - 1)
        ours: list[float] = []
        theirs: list[float] = []
        ours_cpu: list[float] = []
        theirs_cpu: list[float] = []
        for n in range(turns):
            if n % 2 == 0:
                ours += await opencrab_turns(runtime, provider, 1, ours_cpu)
                theirs.append(langgraph_turn(app, n, theirs_cpu))
            else:
                theirs.append(langgraph_turn(app, n, theirs_cpu))
                ours += await opencrab_turns(runtime, provider, 1, ours_cpu)
        with runtime.db.read() as c:
            events = int(c.execute(text("SELECT count(*) FROM events")).scalar_one())
    return Leg(database, ours, theirs, ours_cpu, theirs_cpu, events, setting)


async def sqlite_leg(turns: int, langgraph_synchronous: str | None = None) -> Leg:
    """OpenCrab's SQLite store against SqliteSaver, both files in one temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'opencrab.db'}")
        db.upgrade()
        try:
            with langgraph_sqlite(Path(tmp) / "langgraph.db", langgraph_synchronous) as (
                app,
                conn,
            ):
                leg = await run_leg("sqlite", db, app, turns, "")
                with db.read() as ours:
                    mine = _sqlite_mode(lambda q: ours.exec_driver_sql(q).scalar_one())
                theirs = _sqlite_mode(lambda q: conn.execute(q).fetchone()[0])
                leg.setting = f"OpenCrab {mine}, SqliteSaver {theirs}"
                return leg
        finally:
            db.close()


def _sqlite_mode(query: Callable[[str], Any]) -> str:
    """journal_mode and synchronous of one SQLite connection, e.g. "wal/NORMAL"."""
    synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[int(query("PRAGMA synchronous"))]
    return f"{query('PRAGMA journal_mode')}/synchronous={synchronous}"


async def postgres_leg(turns: int) -> Leg:
    """OpenCrab against PostgresSaver, each in a fresh database of one server."""
    with postgres_server(os.environ.get(ENV_URL)) as server:
        ours_url, theirs_url = server.create_database(), server.create_database()
        db = Database(ours_url)
        db.upgrade()
        try:
            with db.read() as c:
                shown = {
                    name: c.exec_driver_sql(f"SHOW {name}").scalar_one()
                    for name in ("server_version", "fsync", "synchronous_commit")
                }
            setting = ", ".join(f"{k}={v}" for k, v in shown.items()) + (
                f" ({ENV_URL})" if os.environ.get(ENV_URL) else " (throwaway cluster)"
            )
            with langgraph_postgres(theirs_url) as app:
                return await run_leg("postgresql", db, app, turns, setting)
        finally:
            db.close()


# ------------------------------------------------------------------ main
NAMES = {"sqlite": "SqliteSaver", "postgresql": "PostgresSaver"}


def target_of(leg: Leg) -> float:
    """The leg's target ratio (SQLite's depends on SqliteSaver's synchronous mode)."""
    if leg.database == "sqlite" and "SqliteSaver wal/synchronous=NORMAL" not in leg.setting:
        return SQLITE_FULL_TARGET
    return TARGETS[leg.database]


async def main(turns: int, only: str | None, sqlite_synchronous: str | None) -> None:
    legs = []
    if only in (None, "sqlite"):
        legs.append(await sqlite_leg(turns, sqlite_synchronous))
    if only in (None, "postgresql"):
        legs.append(await postgres_leg(turns))
    for leg in legs:
        print(f"== {leg.database}: {leg.setting}")
        report("OpenCrab SkillEngine", leg.ours, leg.ours_cpu)
        report(f"LangGraph + {NAMES[leg.database]} (sync)", leg.theirs, leg.theirs_cpu)
        print(f"events stored by OpenCrab: {leg.events} ({STEPS_PER_TURN}+ per turn, all durable)")
    print("== ratios LangGraph / OpenCrab (p50 per turn)")
    for leg in legs:
        target = target_of(leg)
        verdict = "met" if leg.ratio >= target else "NOT met"
        cpu = statistics.median(leg.theirs_cpu) / statistics.median(leg.ours_cpu)
        print(
            f"{leg.database:11s} {leg.ratio:5.2f}x  (target >= {target:g}x: {verdict}); "
            f"client CPU per turn {cpu:5.2f}x"
        )


def report(name: str, times: list[float], cpu: list[float]) -> None:
    ordered = sorted(times)
    p50 = statistics.median(times) * 1000
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000
    mean = statistics.fmean(times) * 1000
    cpu_p50 = statistics.median(cpu) * 1000
    print(
        f"{name:34s} per turn p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  mean {mean:6.2f} ms  "
        f"per step p50 {p50 / STEPS_PER_TURN:5.2f} ms  CPU p50 {cpu_p50:6.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--only", choices=sorted(NAMES), help="run one database's leg")
    parser.add_argument(
        "--langgraph-sqlite-synchronous",
        choices=["NORMAL", "FULL"],
        help="SqliteSaver's PRAGMA synchronous (default: SQLite's own, FULL; OpenCrab's "
        "store runs NORMAL, so NORMAL compares at equal durability)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.only, args.langgraph_sqlite_synchronous))
