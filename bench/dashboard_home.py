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
    from opencrab.core.skills import SkillManager, load_standard_skills, standard_skill_dirs
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
    args = parser.parse_args()

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
        populate(db, settings, args.agents)
        print(f"{args.agents} agents stored in {time.perf_counter() - started:.1f} s")
        router = LlmRouter(settings)
        router.register_provider(ScriptedProvider("openai", "unused"))
        app = create_app(settings, db, router=router, heartbeat=True)
        timings: dict[str, list[float]] = {"/": [], "/api/agent-overview": []}
        with LocalClient(app) as client:
            page = client.get("/")
            cards = page.text.count('class="card agent-card"')
            assert cards == args.agents, f"the page shows {cards} cards of {args.agents}"
            assert len(client.get("/api/agent-overview").json()) == args.agents
            for _ in range(args.rounds):
                for path, spent in timings.items():
                    begin = time.perf_counter()
                    response = client.get(path)
                    spent.append(time.perf_counter() - begin)
                    assert response.status_code == 200, response.text[:200]
        db.close()
    page_ms = statistics.median(timings["/"]) * 1000
    api_ms = statistics.median(timings["/api/agent-overview"]) * 1000
    print(f"home page (HTML, {args.agents} cards): p50 {page_ms:.1f} ms, {len(page.text):,} bytes")
    print(f"GET /api/agent-overview (JSON):      p50 {api_ms:.1f} ms")
    ratio = page_ms / api_ms
    print(f"page / API: {ratio:.2f}x (target: within 2x) {'ok' if ratio <= 2 else 'OVER'}")


if __name__ == "__main__":
    main()
