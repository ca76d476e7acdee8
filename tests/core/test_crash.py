"""A process killed in the middle of a turn loses nothing that was already done: every
finished step (its events, memory logs and the action's effects) is in SQLite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from opencrab.config import Settings
from opencrab.core.agent import AgentStore
from opencrab.core.memory import MemoryManager
from opencrab.event_log import EventLog
from opencrab.store import Database

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from typing import Any, ClassVar
    sys.path.insert(0, {root!r})
    from opencrab.actions.base import Action, ActionContext, ActionResult
    from opencrab.config import load_settings
    from opencrab.core.agent import AgentCreate, AgentUpdate
    from opencrab.core.runtime import Runtime
    from opencrab.core.tools import sync_tools, tool_id
    from opencrab.llm.router import LlmRouter
    from tests.core.conftest import calls
    from tests.fakes.scripted_provider import ScriptedProvider

    class Crash(Action):
        name = "crash"
        description = "kills the process"
        parameters: ClassVar[dict[str, Any]] = {{"type": "object", "properties": {{}}}}

        async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
            os._exit(9)

    async def main() -> None:
        settings = load_settings()
        provider = ScriptedProvider(
            "openai",
            calls(("ws_write", {{"path": "saved.txt", "content": "kept"}})),
            calls(("crash", {{}})),
        )
        router = LlmRouter(settings)
        router.register_provider(provider)
        async with Runtime.open(settings, router=router) as runtime:
            runtime.registry.register(Crash())
            agent = runtime.agents.create(AgentCreate(name="victim"))
            sync_tools(runtime.db, runtime.registry)
            runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("crash")]))
            await runtime.chat(agent, "go")

    asyncio.run(main())
    """
)


def test_a_killed_turn_keeps_its_finished_steps(
    settings: Settings, data_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "crash.py"
    script.write_text(SCRIPT.format(root=str(Path(__file__).resolve().parents[2])))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 9, done.stderr

    db = Database(settings.database_url)
    agent = AgentStore(db, settings).get("victim")
    memory = MemoryManager(db, agent.id)
    (session,) = [s.session_id for s in memory.sessions()]
    events = EventLog(db).trace(session)
    assert [e.type for e in events] == [
        "user",
        "tool_call",
        "token_usage",
        "tool_result",  # ws_write finished: durable with its effect
        "tool_call",  # the call that was running when the process died
        "token_usage",
    ]
    assert (data_dir / "agents" / agent.id / "workspace" / "saved.txt").read_text() == "kept"
    assert [log.log_type for log in memory.session_logs(session)] == ["speech", "action"]
    db.close()
