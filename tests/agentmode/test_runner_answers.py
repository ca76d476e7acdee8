"""A real Claude Code sub-agent (started without full-auto) stops at its permission
menu; the runner shows the task WaitingInput with the question from the Notification
(permission_prompt) hook, and `runner.answer` — what `POST …/tasks/{task}/answer` and
`opencrab agent-mode answer` call — types the chosen number as a key: "1" lets the CLI
go on to its edit, "3" refuses it (a pasted "3" and Enter would have said Yes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from opencrab.agentmode.clis import CLAUDE_CODE, match_screen
from opencrab.agentmode.model import (
    CompletionSource,
    SessionStatus,
    SubAgentStatus,
    TaskStatus,
)
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.store import Database
from tests.agentmode.runner_support import (
    CLAUDE,
    CODEX,
    make_repo,
    make_session,
    real_cli_runner,
    until,
)
from tests.fakes.coding_models import ScriptedModel, Text, ToolCall
from tests.fakes.llm_server import FakeLlmServer

WAIT = 180.0  # a guard against hanging forever, not a speed limit
TASK = "task-001"


@dataclass
class Asking:
    """A started session whose one task waits at Claude Code's permission menu."""

    runner: AgentModeRunner
    session_id: str
    repo: Path
    model: ScriptedModel
    question: str  # what the runner shows
    menu: str  # the menu's question on the screen

    async def screen(self) -> str:
        """The task's pane."""
        return await self.runner.output(self.session_id, TASK)

    async def menu_question(self) -> str | None:
        """The question of the permission menu the pane shows, if it shows one."""
        found = match_screen(CLAUDE_CODE, await self.screen())
        return None if found is None else found.question

    async def menu_closed(self) -> bool:
        """Whether the pane no longer shows a permission menu."""
        return await self.menu_question() is None


@pytest.fixture
async def asking(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
) -> Asking:
    """A one-task session started with Claude Code asking first, at its question."""
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel([CLAUDE.run("printf 'approved\\n' > approved.txt"), Text("Finished.")])
    endpoint = CLAUDE.serve(model, fake_llm_server)
    runner = real_cli_runner(settings, db, tmp_path, tmux_server, CLAUDE, endpoint)
    plan = [PlannedTask(TASK, "approve", "Write approved.txt.")]
    session_id = make_session(runner.service, repo, plan)
    await runner.start(session_id, CLAUDE.cli, full_auto=False)

    def waiting() -> str | None:
        state = runner.run_state(session_id)
        task = runner.service.get(session_id).tasks[0]
        agent = task.sub_agent
        if agent is None or agent.status is not SubAgentStatus.WAITING_INPUT:
            return None
        assert task.status is TaskStatus.RUNNING
        return None if state is None else state.questions.get(TASK)

    question = await until(waiting, "the task's question", WAIT)
    asking = Asking(runner, session_id, repo, model, question, "")
    # a user answers the menu they see
    asking.menu = await until(asking.menu_question, "the menu on the screen", WAIT)
    return asking


async def test_a_permission_answered_yes_through_the_runner_lets_the_edit_happen(
    asking: Asking,
) -> None:
    assert asking.question == "Claude needs your permission"  # the Notification hook's
    assert asking.menu == "Do you want to proceed?"
    worktree = asking.repo / ".worktrees" / "agent-approve"
    assert not (worktree / "approved.txt").exists()  # nothing ran before the answer

    await asking.runner.answer(asking.session_id, TASK, "1")  # 1. Yes
    session = await asking.runner.wait(asking.session_id)

    assert session.status is SessionStatus.COMPLETED, session.tasks
    task = session.tasks[0]
    assert task.status is TaskStatus.COMPLETED
    assert task.sub_agent is not None
    assert task.sub_agent.completion_source is CompletionSource.HOOK
    assert task.result is not None
    assert task.result.summary == "Finished."
    state = asking.runner.run_state(asking.session_id)
    assert state is not None
    assert TASK not in state.questions
    outcome = state.outcomes[TASK]
    assert outcome.patch_file is not None
    assert "+approved" in Path(outcome.patch_file).read_text().splitlines()


async def test_a_permission_answered_no_through_the_runner_refuses_the_edit(
    asking: Asking,
) -> None:

    await asking.runner.answer(asking.session_id, TASK, "3")  # 3. No (a paste + Enter: Yes)
    await until(asking.menu_closed, "the menu to close", WAIT)
    await asking.runner.answer(asking.session_id, TASK, "Leave it as it is.")  # its next words
    session = await asking.runner.wait(asking.session_id)

    assert session.status is SessionStatus.COMPLETED, session.tasks
    assert session.tasks[0].result is not None
    assert session.tasks[0].result.summary == "Finished."
    state = asking.runner.run_state(asking.session_id)
    assert state is not None
    assert state.outcomes[TASK].files_changed == 0  # the command never ran
    last = asking.model.requests[-1].json["messages"]
    assert "Leave it as it is." in str(last[-1]["content"])
    assert len(asking.model.requests) == 2  # the refusal did not run the tool: no result


async def test_a_codex_approval_is_read_from_the_screen_and_answered_through_the_runner(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
) -> None:
    """Codex's approvals send no signal (its notify knows only finished turns): the runner
    reads the silent pane, shows the question, and the answer "1" approves the command."""
    repo = make_repo(tmp_path / "repo")
    escalate = {
        "cmd": "printf 'approved\\n' > approved.txt",
        "sandbox_permissions": "require_escalated",  # outside the read-only sandbox: asks
        "justification": "Write approved.txt?",
    }
    model = ScriptedModel([ToolCall(CODEX.shell_tool, escalate), Text("Finished.")])
    endpoint = CODEX.serve(model, fake_llm_server)
    runner = real_cli_runner(settings, db, tmp_path, tmux_server, CODEX, endpoint)
    session_id = make_session(runner.service, repo, [PlannedTask(TASK, "approve", "Write it.")])
    await runner.start(session_id, CODEX.cli, full_auto=False)

    def waiting() -> str | None:
        agent = runner.service.get(session_id).tasks[0].sub_agent
        state = runner.run_state(session_id)
        if agent is None or agent.status is not SubAgentStatus.WAITING_INPUT or state is None:
            return None
        return state.questions.get(TASK)

    question = await until(waiting, "the approval question", WAIT)
    assert question == "Would you like to run the following command?"
    worktree = repo / ".worktrees" / "agent-approve"
    assert not (worktree / "approved.txt").exists()  # nothing ran before the answer

    await runner.answer(session_id, TASK, "1")  # 1. Yes, proceed
    session = await runner.wait(session_id)

    assert session.status is SessionStatus.COMPLETED, session.tasks
    task = session.tasks[0]
    assert task.result is not None
    assert task.result.summary == "Finished."
    state = runner.run_state(session_id)
    assert state is not None
    assert TASK not in state.questions
    patch = state.outcomes[TASK].patch_file
    assert patch is not None
    assert "+approved" in Path(patch).read_text().splitlines()
