"""Framework time per agent turn: OpenCrab's SkillEngine vs LangGraph + SqliteSaver.

The same turn in both, with an in-process scripted model (no network, no tokens):
user message → the model calls an action → its result → the model calls send_speech.
That is four recorded steps (user, tool call, tool result, speech).

- OpenCrab: the real engine (context building from the store, tool definitions, action
  validation and dispatch, AgentEvents + memory logs + session messages committed per
  step in SQLite WAL).
- LangGraph: a StateGraph (model node ⇄ tool node) compiled with SqliteSaver; invoked
  with durability="sync", so every step's checkpoint is written before the next.

Each turn starts a new session / thread; the two run alternately, turn by turn, in one
process, so machine noise hits both alike. Prints p50/mean per turn and per step, the
ratio LangGraph / OpenCrab, and OpenCrab's per-step time scaled to LangGraph's reference
1.3 ms/step (the target is < 0.5 ms/step on that scale).

    python bench/engine_turn.py [--turns N]
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
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.scripted_provider import ScriptedProvider, reply

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ToolCall
from opencrab.messages import CliSource, IncomingMessage

STEPS_PER_TURN = 4
LANGGRAPH_REFERENCE_MS = 1.3  # LangGraph + SqliteSaver per step, as the issue measured it
TARGET_MS_PER_STEP = 0.5


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
async def opencrab_turns(runtime: Runtime, provider: ScriptedProvider, turns: int) -> list[float]:
    agent = runtime.agents.get("bench")
    times = []
    for _ in range(turns):
        session = ensure_chat_session(runtime.db, agent.id)
        provider.outcomes.clear()
        provider.then(*script(), "unused")
        message = IncomingMessage.text("Hello!", source=CliSource(session_id=session))
        start = time.perf_counter()
        result = await runtime.engine.process(agent, message, session_id=session)
        times.append(time.perf_counter() - start)
        assert result.reply == "Hello there!", result
    return times


# ------------------------------------------------------------------ LangGraph
class State(TypedDict):
    messages: list[dict[str, Any]]
    done: bool


def langgraph_app(path: Path) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver
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
    conn = sqlite3.connect(path, check_same_thread=False)
    return graph.compile(checkpointer=SqliteSaver(conn)), conn


def langgraph_turn(app: Any, n: int) -> float:
    config = {"configurable": {"thread_id": f"t{n}"}}
    start = time.perf_counter()
    out = app.invoke(
        {"messages": [{"role": "user", "content": "Hello!"}], "done": False},
        config,
        durability="sync",
    )
    elapsed = time.perf_counter() - start
    assert out["done"]
    return elapsed


# ------------------------------------------------------------------ main
async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENCRAB_HOME"] = str(Path(tmp) / "data")
        settings = load_settings()
        provider = ScriptedProvider("openai", "unused")
        router = LlmRouter(settings)
        router.register_provider(provider)
        app, conn = langgraph_app(Path(tmp) / "langgraph.db")
        async with Runtime.open(settings, router=router) as runtime:
            runtime.agents.create(AgentCreate(name="bench"))
            await opencrab_turns(runtime, provider, 20)  # warm-up
            for n in range(20):
                langgraph_turn(app, -n - 1)
            ours: list[float] = []
            theirs: list[float] = []
            for n in range(turns):
                if n % 2 == 0:
                    ours += await opencrab_turns(runtime, provider, 1)
                    theirs.append(langgraph_turn(app, n))
                else:
                    theirs.append(langgraph_turn(app, n))
                    ours += await opencrab_turns(runtime, provider, 1)
            with runtime.db.read() as c:
                from sqlalchemy import text

                events = c.execute(text("SELECT count(*) FROM events")).scalar()
        conn.close()
    report("OpenCrab SkillEngine", ours)
    report("LangGraph + SqliteSaver (sync)", theirs)
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"events stored by OpenCrab: {events} ({STEPS_PER_TURN}+ per turn, all durable)")
    print(f"ratio LangGraph/OpenCrab (p50 per turn): {ratio:.2f}x")
    # Absolute times drift on a shared machine; the target is read against LangGraph in
    # the same run: < 0.5 ms per step where LangGraph + SqliteSaver takes ~1.3 ms.
    scaled = LANGGRAPH_REFERENCE_MS / ratio
    verdict = "met" if scaled < TARGET_MS_PER_STEP else "NOT met"
    print(
        f"scaled to LangGraph = {LANGGRAPH_REFERENCE_MS} ms/step: OpenCrab {scaled:.2f} ms/step "
        f"(target < {TARGET_MS_PER_STEP} ms/step, i.e. ratio > "
        f"{LANGGRAPH_REFERENCE_MS / TARGET_MS_PER_STEP:.1f}x): {verdict}"
    )


def report(name: str, times: list[float]) -> None:
    p50 = statistics.median(times) * 1000
    mean = statistics.fmean(times) * 1000
    p90 = sorted(times)[int(len(times) * 0.9)] * 1000
    print(
        f"{name:32s} per turn p50 {p50:6.2f} ms  mean {mean:6.2f} ms  p90 {p90:6.2f} ms  "
        f"per step p50 {p50 / STEPS_PER_TURN:5.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.turns))
