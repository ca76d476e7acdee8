"""The dashboard's home page with 200 agents against the JSON API returning the same data.

One in-process app (a real SQLite store, the heartbeat scheduler ticking every agent)
holds 200 agents, each with a persona, a daily budget, chat sessions, curated memories
and today's LLM calls, half of them with their standard skills copied in. Both the page
(`GET /`, server-rendered cards) and `GET /api/agent-overview` read them through
opencrab.core.overview; requests alternate between the two, and the medians are compared
(target: the page within 2x of the API). The page must show every agent's card.

    python bench/dashboard_home.py [--agents 200] [--rounds 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def populate(db: object, settings: object, agents: int) -> None:
    """`agents` agents with sessions, memories, today's calls and (half) their skills."""
    from opencrab.config import Settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.memory import MemoryManager
    from opencrab.core.sessions import ensure_chat_session
    from opencrab.core.skill_files import load_standard_skills
    from opencrab.core.skills import SkillManager, standard_skill_dirs
    from opencrab.core.soul import Soul
    from opencrab.llm.metrics import CallRecord, MetricsRecorder
    from opencrab.store import Database

    assert isinstance(db, Database)
    assert isinstance(settings, Settings)
    store = AgentStore(db, settings)
    docs, _ = load_standard_skills(standard_skill_dirs(settings))
    calls = []
    for n in range(agents):
        agent = store.create(
            AgentCreate.model_validate(
                {
                    "name": f"エージェント{n:03d}",
                    "description": "議論に参加し、意見をまとめるエージェント。" * 2,
                    "prompt": "You help.",
                    "language": "ja" if n % 2 else "en",
                    "soul": Soul(persona_name=f"persona {n}").model_dump(),
                    "llm": {"daily_budget_usd": 0.5},
                }
            )
        )
        for _ in range(3):
            ensure_chat_session(db, agent.id)
        memory = MemoryManager(db, agent.id)
        for text in ("likes tea", "works late"):
            memory.save_curated("core", text)
        if n % 2:
            SkillManager(db, agent.id, docs.get(agent.language, ())).ensure_default_skills()
        calls += [
            CallRecord(
                id=str(uuid4()),
                provider="openai",
                model="gpt-5.2",
                purpose="tool_calling",
                agent_id=agent.id,
                estimated_cost_usd=0.01 * (n % 7),
            )
            for _ in range(5)
        ]
    MetricsRecorder(db).write(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--secs", type=int, default=30)
    args = parser.parse_args()
    home(args.agents, args.rounds)
    sessions_list(args.sessions, args.rounds)
    live_view(args.rate, args.secs)


# ---------------------------------------------------------------- 1. home
def home(agents: int, rounds: int) -> None:
    """The home page with `agents` cards against GET /api/agent-overview."""

    from tests.fakes.scripted_provider import ScriptedProvider
    from tests.server.local import LocalClient

    from opencrab.config import load_settings
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database

    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(overrides={"data_dir": data})
        db = Database(settings.database_url)
        db.upgrade()
        started = time.perf_counter()
        populate(db, settings, agents)
        print(f"{agents} agents stored in {time.perf_counter() - started:.1f} s")
        router = LlmRouter(settings)
        router.register_provider(ScriptedProvider("openai", "unused"))
        app = create_app(settings, db, router=router, heartbeat=True)
        timings: dict[str, list[float]] = {"/": [], "/api/agent-overview": []}
        with LocalClient(app) as client:
            page = client.get("/")
            cards = page.text.count('class="card agent-card"')
            assert cards == agents, f"the page shows {cards} cards of {agents}"
            assert len(client.get("/api/agent-overview").json()) == agents
            for _ in range(rounds):
                for path, spent in timings.items():
                    begin = time.perf_counter()
                    response = client.get(path)
                    spent.append(time.perf_counter() - begin)
                    assert response.status_code == 200, response.text[:200]
        db.close()
    page_ms = statistics.median(timings["/"]) * 1000
    api_ms = statistics.median(timings["/api/agent-overview"]) * 1000
    print(f"home page (HTML, {agents} cards): p50 {page_ms:.1f} ms, {len(page.text):,} bytes")
    print(f"GET /api/agent-overview (JSON):      p50 {api_ms:.1f} ms")
    ratio = page_ms / api_ms
    print(f"page / API: {ratio:.2f}x (target: within 2x) {'ok' if ratio <= 2 else 'OVER'}")


# ---------------------------------------------------------------- 2. the sessions list
def sessions_list(count: int, rounds: int) -> None:
    """The sessions list page against GET /api/sessions, pages of 50, first/middle/last."""
    from tests.fakes.scripted_provider import ScriptedProvider
    from tests.server.local import LocalClient

    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentStore
    from opencrab.core.sessions import ensure_chat_session
    from opencrab.llm.router import LlmRouter
    from opencrab.server.app import create_app
    from opencrab.store import Database

    per_page = 50
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(overrides={"data_dir": data})
        db = Database(settings.database_url)
        db.upgrade()
        started = time.perf_counter()
        store = AgentStore(db, settings)
        owners = [
            store.create(AgentCreate(name=f"話し手{n}", prompt="You help.")).id for n in range(20)
        ]
        for n in range(count):
            ensure_chat_session(db, owners[n % len(owners)])
        print(f"{count:,} sessions stored in {time.perf_counter() - started:.1f} s")
        router = LlmRouter(settings)
        router.register_provider(ScriptedProvider("openai", "unused"))
        app = create_app(settings, db, router=router)
        pages = [1, count // per_page // 2, count // per_page]
        timings: dict[str, list[float]] = {"page": [], "api": []}
        with LocalClient(app) as client:
            for number in pages:
                html = client.get(f"/sessions?page={number}")
                rows = html.text.count("<tr") - 1  # less the header row
                api = client.get(f"/api/sessions?limit={per_page}&offset={(number - 1) * per_page}")
                assert rows == len(api.json()) == per_page, (number, rows, len(api.json()))
            for _ in range(rounds):
                for number in pages:
                    offset = (number - 1) * per_page
                    for kind, path in (
                        ("page", f"/sessions?page={number}"),
                        ("api", f"/api/sessions?limit={per_page}&offset={offset}"),
                    ):
                        begin = time.perf_counter()
                        response = client.get(path)
                        timings[kind].append(time.perf_counter() - begin)
                        assert response.status_code == 200, response.text[:200]
        db.close()
    page_ms = statistics.median(timings["page"]) * 1000
    api_ms = statistics.median(timings["api"]) * 1000
    print(
        f"sessions list page (HTML, {per_page} of {count:,}, pages {pages}): p50 {page_ms:.1f} ms"
    )
    print(f"GET /api/sessions (JSON, same pages):              p50 {api_ms:.1f} ms")
    ratio = page_ms / api_ms
    print(f"page / API: {ratio:.2f}x (target: within 2x) {'ok' if ratio <= 2 else 'OVER'}")


# ---------------------------------------------------------------- 3. the live session view
def live_view(rate: int, secs: int) -> None:
    """A real `opencrab up`; Chromium on /sessions/{id}; events written at `rate`/s.

    The baseline is a bare WebSocket client subscribed to the same session in the same
    run: what the live page draws is compared with what the socket alone receives.
    """
    import json
    import threading
    from uuid import UUID

    import httpx
    from playwright.sync_api import sync_playwright
    from tests.fakes.browser import launch
    from tests.fakes.llm_server import FakeLlmServer
    from tests.fakes.served import ServedOpenCrab
    from websockets.sync.client import connect

    from opencrab.config import load_settings
    from opencrab.event_log import EventLog
    from opencrab.events import MessagePayload, ReasoningPayload, new_event
    from opencrab.store import Database

    total = rate * secs
    with tempfile.TemporaryDirectory() as tmp, FakeLlmServer() as llm:
        data = Path(tmp) / "data"
        with ServedOpenCrab(data, llm=llm) as served:
            api = httpx.Client(base_url=served.url, timeout=30)
            agent = api.post("/api/agents", json={"name": "ライブ", "prompt": "You help."}).json()
            session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
            received: list[float] = []
            subscribed = threading.Event()

            def socket_baseline() -> None:
                origin = {"Origin": served.url}
                with connect(
                    served.url.replace("http", "ws") + "/api/ws", additional_headers=origin
                ) as ws:
                    ws.send(json.dumps({"type": "subscribe", "sessionId": session}))
                    subscribed.set()
                    while len(received) < total:
                        message = json.loads(ws.recv(timeout=60))
                        if message.get("type") == "event":
                            received.append(time.perf_counter())

            listener = threading.Thread(target=socket_baseline, daemon=True)
            listener.start()
            subscribed.wait(10)
            settings = load_settings(overrides={"data_dir": str(data)})
            db = Database(settings.database_url)
            events = EventLog(db)
            with sync_playwright() as playwright:
                browser = launch(playwright)
                page = browser.new_page(base_url=served.url)
                page.goto(f"/sessions/{session}")
                page.wait_for_selector(
                    "#feed[data-connection='live']", state="attached", timeout=15000
                )
                count = "Number(document.getElementById('feed').dataset.eventCount)"
                shown0 = page.evaluate(count)
                written = 0
                backlog: list[int] = []
                trace = UUID(session)
                begin = time.perf_counter()
                step = 0.1  # write a batch every 100 ms
                while written < total:
                    batch = [
                        new_event(
                            trace,
                            (MessagePayload if n % 2 else ReasoningPayload)(
                                text=f"イベント {written + n}: 東京は晴れ、the sky is clear."
                            ),
                        )
                        for n in range(rate // 10)
                    ]
                    events.append_many(batch)
                    written += len(batch)
                    if written % rate == 0:
                        backlog.append(written - (page.evaluate(count) - shown0))
                    ahead = begin + step * (written // (rate // 10)) - time.perf_counter()
                    if ahead > 0:
                        page.wait_for_timeout(ahead * 1000)
                wrote = time.perf_counter() - begin
                deadline = time.perf_counter() + 30
                while page.evaluate(count) - shown0 < total and time.perf_counter() < deadline:
                    page.wait_for_timeout(50)
                caught_up = time.perf_counter() - begin - wrote
                shown = page.evaluate(count) - shown0
                state = page.evaluate("document.getElementById('feed').dataset.connection")
                browser.close()
            listener.join(30)
            db.close()
    print(f"live view: {written:,} events written at {written / wrote:.0f}/s for {wrote:.1f} s")
    print(
        f"  page drew {shown:,} of {total:,} (dropped {total - shown}), socket {state}; "
        f"backlog each second: max {max(backlog)} events, last {backlog[-1]}"
    )
    print(f"  page caught up {caught_up * 1000:.0f} ms after the last write")
    socket_lag = received[-1] - begin - wrote if received else float("nan")
    print(
        f"  baseline, a bare WebSocket subscriber: {len(received):,} received, "
        f"caught up {socket_lag * 1000:.0f} ms after the last write"
    )


if __name__ == "__main__":
    main()
