"""The runner with the REAL Claude Code CLI (clis/node_modules) against the fake Anthropic
server: a two-task DAG, each task editing a file in its own worktree, completion by the
Stop hook, results and diffs recorded, and the transcripts imported as usage under the
master agent."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from opencrab.agentmode.clis import Endpoint
from opencrab.agentmode.model import CompletionSource, SessionStatus, TaskStatus
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.agentmode.runner_support import make_repo, make_runner, make_session
from tests.agentmode.test_real_clis import CLIS_BIN, OFFLINE
from tests.fakes.coding_models import INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, Text, ToolCall
from tests.fakes.llm_server import FakeLlmServer


async def test_claude_code_runs_a_two_task_dag_in_its_own_worktrees(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
) -> None:
    repo = make_repo(tmp_path / "repo")
    master = AgentStore(db, settings).create(AgentCreate(name=settings.agent_mode.master_agent))
    ScriptedModel(
        [
            ToolCall("Bash", {"command": "printf 'done;' >> note.txt", "description": "note"}),
            Text("Wrote note.txt."),
        ]
    ).serve_anthropic(fake_llm_server)
    endpoint = Endpoint(fake_llm_server.url, "sk-ant-opencrab-test-0123456789", "claude-sonnet-4-5")
    runner = make_runner(
        settings,
        db,
        tmp_path,
        tmux_server,
        endpoints={"ClaudeCode": endpoint},
        extra_env=OFFLINE,
    )
    runner.search = [CLIS_BIN]
    plan = [
        PlannedTask("task-001", "first note", "Append to note.txt."),
        PlannedTask("task-002", "second note", "Append to note.txt.", ("task-001",)),
    ]
    session_id = make_session(runner.service, repo, plan)

    await runner.start(session_id, "claude")
    session = await runner.wait(session_id)

    assert session.status is SessionStatus.COMPLETED, session.tasks
    first, second = session.tasks
    for task in session.tasks:
        assert task.status is TaskStatus.COMPLETED
        assert task.sub_agent is not None
        assert task.sub_agent.completion_source is CompletionSource.HOOK
        assert task.result is not None
        assert task.result.summary == "Wrote note.txt."
    assert first.assigned_worktree is not None
    assert second.assigned_worktree is not None
    assert first.assigned_worktree.path != second.assigned_worktree.path
    assert (first.assigned_worktree.path / "note.txt").read_text() == "done;"
    assert (second.assigned_worktree.path / "note.txt").read_text() == "done;done;"  # merged
    state = runner.run_state(session_id)
    assert state is not None
    assert state.outcomes["task-001"].files_changed == 1
    assert state.outcomes["task-002"].insertions == 1
    assert state.outcomes["task-001"].imported_files >= 1
    assert state.outcomes["task-002"].imported_files >= 1
    m = llm_usage_metrics.c
    with db.read() as conn:
        rows = list(conn.execute(sa.select(m.agent_id, m.input_tokens, m.output_tokens)))
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [(INPUT_TOKENS, OUTPUT_TOKENS)] * 4
    assert {r.agent_id for r in rows} == {master.id}
