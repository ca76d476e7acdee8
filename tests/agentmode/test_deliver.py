"""A finished OpenCode task's usage: the database OpenCode writes under the XDG data
folder agent mode gives it (inside the sub-agent's HOME) is where its profile says its
transcripts are, and `import_transcripts` stores each call there once, under the agent
given, while a bad database is logged and stored nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.agentmode import deliver
from opencrab.agentmode.clis import prepare, profile_for
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.fakes.opencode_store import OpenCodeStore, assistant, tokens, user


async def test_an_opencode_tasks_calls_are_imported_once_under_the_agent(
    settings: Settings, db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    profile = profile_for("opencode")
    launch = prepare(
        profile,
        executable="opencode",
        home=tmp_path / "home",
        workdir=tmp_path,
        signal_dir=tmp_path / "signals",
        endpoint=None,
        prompt="go",
    )
    assert launch.transcripts == Path(launch.env["XDG_DATA_HOME"]) / "opencode"
    store = OpenCodeStore(launch.transcripts / "opencode.db")
    ses = store.session("ses_task")
    store.message(ses, "msg_1", user())
    store.message(ses, "msg_2", assistant(tokens(1000, 30, read=200, reasoning=5)))
    store.message(ses, "msg_3", "not JSON")
    agent = AgentStore(db, settings).create(AgentCreate(name="master"))

    with caplog.at_level(logging.WARNING, "opencrab.agentmode.deliver"):
        first = await deliver.import_transcripts(db, "opencode", launch.transcripts, agent.id)
        again = await deliver.import_transcripts(db, "opencode", launch.transcripts, agent.id)
    store.close()

    assert (first, again) == (1, 1)  # one database read each time
    m = llm_usage_metrics.c
    query = sa.select(m.agent_id, m.task_type, m.input_tokens, m.output_tokens)
    with db.read() as conn:
        assert list(map(tuple, conn.execute(query))) == [(agent.id, "opencode", 1200, 35)]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2  # each import names the message it could not read
    assert logged[0].startswith("agent-mode: not imported from OpenCode's database: ")
    assert "message 'msg_3': not JSON: " in logged[0]
