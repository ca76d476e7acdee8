"""The runner with the REAL coding CLIs (clis/node_modules: Claude Code, Codex, Gemini CLI,
OpenCode) against the fake model servers (Anthropic Messages SSE, Responses API SSE, the
Gemini API's streamGenerateContent SSE, Chat Completions SSE), each sub-agent in its own
HOME and behind a proxy that refuses (and records) every request for another host: a
two-task DAG, each task editing a file in its own worktree, completion by the Stop hook /
Codex's notify / Gemini CLI's AfterAgent hook / OpenCrab's OpenCode plugin, results and
diffs recorded, and each task's transcript imported under the master agent (Gemini
CLI's chats and OpenCode's database: their usage alone), one metrics row per model call
(its tokens; the cost where model_pricing prices the provider and model the CLI
records)."""

from __future__ import annotations

import asyncio
import faulthandler
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.agentmode.clis import profile_for
from opencrab.agentmode.model import CompletionSource, SessionStatus, TaskStatus
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.importers.opencode import session_id_of
from opencrab.importers.store import session_id_for
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.agentmode.runner_support import (
    CLAUDE,
    CODEX,
    GEMINI,
    OFFLINE,
    OPENCODE,
    RealCli,
    make_repo,
    make_session,
    real_cli_runner,
)
from tests.fakes.coding_models import INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, Text
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.refusing_proxy import RefusingProxy

# Two starts of a real CLI one after the other may take minutes each on a loaded machine
# (OpenCode: about 4 minutes a task with a load of 15 on 2 cores); a CLI that never
# finishes fails the test with the tasks' states instead of hanging it.
SESSION_SECS = 540


# The CLIs shown to send nothing beyond the fake model. Claude Code still asks the proxy
# for downloads.claude.ai and Codex for raw.githubusercontent.com (refused, so offline
# they only fail); their profiles need the setting that stops it before they join.
SILENT_CLIS = {"Gemini", "OpenCode"}


@pytest.fixture
def session_watchdog() -> None:
    """The suite's watchdog (pyproject faulthandler_timeout) re-armed for this test with
    SESSION_SECS and a minute more: still a dump of every thread and an exit if it hangs."""
    faulthandler.dump_traceback_later(SESSION_SECS + 60, exit=True)


def task_usage(
    db: Database, runner: AgentModeRunner, cli: RealCli, session_id: str, task_id: str
) -> list[sa.Row[tuple[str, int, int, float]]]:
    """The usage rows imported from the transcripts in the task's own sub-agent HOME
    (OpenCode: from the sessions in its database)."""
    profile = profile_for(cli.cli)
    assert profile.transcripts is not None
    folder = runner.runs.task_dir(session_id, task_id) / "home" / profile.transcripts
    if cli.importer == "opencode":
        uri = (folder / "opencode.db").as_uri()
        with closing(sqlite3.connect(f"{uri}?mode=ro", uri=True)) as found:
            ids = [session_id_of(s) for (s,) in found.execute("SELECT id FROM session")]
    else:
        ids = [session_id_for(cli.importer, p.resolve()) for p in folder.rglob("*.jsonl")]
    assert ids, f"no transcript in {folder}"
    m = llm_usage_metrics.c
    query = sa.select(m.agent_id, m.input_tokens, m.output_tokens, m.estimated_cost_usd)
    with db.read() as conn:
        return list(conn.execute(query.where(m.session_id.in_(ids))))


@pytest.mark.parametrize("cli", [CLAUDE, CODEX, GEMINI, OPENCODE], ids=lambda cli: cli.cli)
async def test_a_real_cli_runs_a_two_task_dag_in_its_own_worktrees(
    cli: RealCli,
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
    session_watchdog: None,
) -> None:
    repo = make_repo(tmp_path / "repo")
    master = AgentStore(db, settings).create(AgentCreate(name=settings.agent_mode.master_agent))
    model = ScriptedModel([cli.run("printf 'done;' >> note.txt"), Text("Wrote note.txt.")])
    endpoint = cli.serve(model, fake_llm_server)
    with RefusingProxy() as proxy:
        offline = OFFLINE | {"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url}
        runner = real_cli_runner(settings, db, tmp_path, tmux_server, cli, endpoint, offline)
        plan = [
            PlannedTask("task-001", "first note", "Append to note.txt."),
            PlannedTask("task-002", "second note", "Append to note.txt.", ("task-001",)),
        ]
        session_id = make_session(runner.service, repo, plan)

        await runner.start(session_id, cli.cli)
        try:
            session = await asyncio.wait_for(runner.wait(session_id), SESSION_SECS)
        except TimeoutError:
            await runner.close()
            tasks = runner.service.get(session_id).tasks
            raise AssertionError(f"not finished: {tasks}") from None
    if cli.agent_type in SILENT_CLIS:
        assert proxy.asked == []  # nothing left for a host other than the fake model
    assert model.requests, "the CLI never reached the fake model"
    for request in model.requests:  # the key, in whichever header the CLI's API uses
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        sent = {bearer, request.headers.get("x-api-key"), request.headers.get("x-goog-api-key")}
        assert cli.api_key in sent, request.headers

    assert session.status is SessionStatus.COMPLETED, session.tasks
    first, second = session.tasks
    for task in session.tasks:
        assert task.status is TaskStatus.COMPLETED
        assert task.sub_agent is not None
        assert task.sub_agent.agent_type.value == cli.agent_type
        assert task.sub_agent.completion_source is CompletionSource.HOOK  # not the exit
        assert task.result is not None
        assert task.result.summary == "Wrote note.txt."  # the CLI's last message
    assert first.assigned_worktree is not None
    assert second.assigned_worktree is not None
    assert first.assigned_worktree.path != second.assigned_worktree.path
    assert (first.assigned_worktree.path / "note.txt").read_text() == "done;"
    assert (second.assigned_worktree.path / "note.txt").read_text() == "done;done;"  # merged
    state = runner.run_state(session_id)
    assert state is not None
    for task_id, added in (("task-001", "+done;"), ("task-002", "+done;done;")):
        outcome = state.outcomes[task_id]
        assert (outcome.files_changed, outcome.insertions) == (1, 1)
        assert outcome.patch_file is not None
        assert added in Path(outcome.patch_file).read_text().splitlines()  # vs start branch
        assert outcome.imported_files >= 1
    await runner.close()  # imports once more: lines a CLI wrote after its hook
    for task in session.tasks:
        rows = task_usage(db, runner, cli, session_id, task.id)
        assert [(r.input_tokens, r.output_tokens) for r in rows] == [
            (INPUT_TOKENS, OUTPUT_TOKENS)
        ] * 2, task.id
        assert {r.agent_id for r in rows} == {master.id}
        assert all((r.estimated_cost_usd > 0) is cli.priced for r in rows), rows
