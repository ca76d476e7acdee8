"""Starting one task's sub-agent: its worktree, its HOME and the pane it runs in.

The slow parts of a start (git worktree add and merges, writing the CLI's HOME, opening
the pane and waiting for the CLI's pid) run here without the runner's session lock, so
watching the other sub-agents never waits for a start. The runner records the result.

Every sub-agent gets, besides its profile's environment (`clis.prepare`):
`OPENCRAB_SESSION_ID`, `OPENCRAB_TASK_ID`, `OPENCRAB_TASK_PROMPT` (the task's prompt; an
`other` program reads it from there: it is not typed into its pane, where it could be
taken for an answer), `OPENCRAB_SIGNAL_DIR` and `OPENCRAB_SIGNAL_COMMAND` (a command that
records a hook-style JSON signal from stdin, e.g. `{"hook_event_name": "Stop",
"last_assistant_message": "…"}` or a `Notification` with a `message` question).
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from opencrab.agentmode import clis, worktrees
from opencrab.agentmode.clis import Endpoint, Launch, Observation, Profile
from opencrab.agentmode.model import (
    AgentSession,
    SubAgent,
    SubAgentId,
    SubAgentStatus,
    SubAgentType,
    Task,
    TaskStatus,
    WorktreeRef,
    WorktreeStrategy,
    utcnow,
)
from opencrab.agentmode.runstate import RunState
from opencrab.agentmode.signals import Signal
from opencrab.agentmode.states import move_task
from opencrab.agentmode.tmux import Pane, TmuxError, TmuxServer
from opencrab.errors import ValidationError


@dataclass
class Watched:
    """A running sub-agent as the watch loop follows it."""

    task_id: str
    pane_id: str
    pid: int
    signal_dir: Path
    profile: Profile
    prompt: str
    offset: int = 0
    size: int = 0
    signals: list[Signal] = field(default_factory=list)
    exit_status: int | None = None
    screen_at: float = 0.0  # when the watch loop last looked at (or heard from) it
    looked_at: float = 0.0  # when idle.look last read its screen
    screen_digest: str = ""  # that screen's hash, and since when it has not changed
    quiet_since: float = field(default_factory=time.monotonic)


SCREEN_EVERY_SECS = 1.5  # how often a silent CLI's pane is read for a question
SCREEN_LINES = 60


async def screen_question(
    tmux: TmuxServer, item: Watched, agent: SubAgent | None
) -> Observation | None:
    """The fallback for a question that sends no signal (Codex's approvals; a start-up
    question of a CLI whose hooks report the others, such as Claude Code's "use this
    API key?", until its first signal): while it runs, at most every SCREEN_EVERY_SECS and
    not sooner after its last signal (an answer's included), its pane matched against
    the profile's prompts (`clis.match_screen`, never on text echoed from the task's
    prompt); the WaitingInput observation, or None."""
    profile = item.profile
    if profile.asks_by_hook:  # its hooks report questions; before its first, start-up ones
        startup = tuple(p for p in profile.screen if p.startup)
        profile = replace(profile, screen=() if item.signals else startup)
    if not profile.screen or item.exit_status is not None:
        return None
    if agent is None or agent.status is not SubAgentStatus.RUNNING:
        return None
    now = time.monotonic()
    if now - item.screen_at < SCREEN_EVERY_SECS:
        return None
    item.screen_at = now
    try:
        text = await tmux.capture(item.pane_id, SCREEN_LINES)
    except TmuxError:
        return None  # the pane's end is for the exit check
    seen = clis.observe(item.signals, None, screen=text, profile=profile, prompt=item.prompt)
    return seen if seen.status == "WaitingInput" else None


@dataclass(frozen=True)
class Opened:
    """A sub-agent just started: its pane, how it was launched, its worktree."""

    pane: Pane
    launch: Launch
    profile: Profile
    worktree: WorktreeRef
    created: bool  # a new worktree (False: a Shared or retried task's existing one)


def record_started(session: AgentSession, task: Task, opened: Opened, prompt: str) -> Watched:
    """Record on `session` that `task`'s sub-agent started as `opened` (its worktree, its
    SubAgent Starting until it shows it is up, the task Running); what to watch of it."""
    ref = next((w for w in session.worktrees if w.branch_name == opened.worktree.branch_name), None)
    if ref is None:
        ref = opened.worktree
        session.worktrees.append(ref)
    if task.id not in ref.task_ids:
        ref.task_ids.append(task.id)
    task.assigned_worktree = ref.model_copy(deep=True)
    number = sum(1 for t in session.tasks if t.sub_agent is not None) + 1
    now = utcnow()
    task.sub_agent = SubAgent(
        id=SubAgentId(f"agent-{number:03d}"),
        agent_type=SubAgentType(opened.profile.agent_type),
        pane_id=opened.pane.pane_id,
        pid=opened.pane.pid,
        status=SubAgentStatus.STARTING,  # Running once it shows it is up (idle.py)
        started_at=now,
        completed_at=None,
        completion_source=None,
    )
    move_task(task, TaskStatus.RUNNING, now)
    signal_dir = opened.launch.signal_dir
    return Watched(
        task.id, opened.pane.pane_id, opened.pane.pid, signal_dir, opened.profile, prompt
    )


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (read from /proc, no tmux call)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def task_prompt(session: AgentSession, task: Task) -> str:
    """What a sub-agent is asked to do: the task, in the context of the user's request."""
    parts = [task.name]
    if task.description.strip():
        parts.append(task.description.strip())
    request = session.request().strip()
    if request and request not in parts:
        parts.append(f"(Part of the request: {request})")
    return "\n\n".join(parts)


async def current_branch(repo: Path) -> str:
    """The branch checked out in `repo` (ValidationError on a detached HEAD)."""
    name = (await worktrees.git(repo, "rev-parse", "--abbrev-ref", "HEAD")).strip()
    if name == "HEAD":
        raise ValidationError(f"{repo} has a detached HEAD: check out the branch to start from")
    return name


async def ensure_worktree(
    repo: Path, state: RunState, task: Task, known: Sequence[WorktreeRef]
) -> tuple[WorktreeRef, bool]:
    """The task's worktree: a Shared (or retried) task's existing one, else a new one on
    its planned branch from the start branch with its dependencies' branches merged."""
    branch = state.branches[task.id]
    existing = next((w for w in known if w.branch_name == branch), None)
    if existing is not None:
        problem = await worktrees.worktree_missing(repo, branch)
        if problem is not None:
            raise ValidationError(problem)
        return existing, False
    if task.worktree_strategy is WorktreeStrategy.SHARED and task.dependencies:
        raise ValidationError(f"the worktree of {task.dependencies[0]} ({branch}) is not there")
    merge = [state.branches[d] for d in task.dependencies if state.branches.get(d) != branch]
    made = await worktrees.create_worktree(repo, branch, state.start_branch, merge=merge)
    ref = WorktreeRef(branch_name=branch, path=made.path, created_at=utcnow(), task_ids=[task.id])
    return ref, True


async def open_sub_agent(
    tmux: TmuxServer,
    folder: Path,
    session_id: str,
    task: Task,
    prompt: str,
    state: RunState,
    worktree: WorktreeRef,
    created: bool,
    *,
    search: Sequence[str | os.PathLike[str]],
    endpoint: Endpoint | None,
    extra_env: Mapping[str, str],
) -> Opened:
    """Write the sub-agent's HOME (under `folder`) and open its labelled pane; the CLI
    talks to `endpoint` (`AgentModeRunner.endpoint_for`)."""
    profile = clis.profile_for(state.cli)
    signal_dir = folder / "signals"
    executable: str | list[str] = (
        list(state.command) if state.command else clis.find_executable(profile, search)
    )
    extra = dict(extra_env) | {
        "OPENCRAB_SIGNAL_DIR": str(signal_dir),
        "OPENCRAB_SIGNAL_COMMAND": shlex.join(clis.signal_command(signal_dir, "other")),
        "OPENCRAB_TASK_PROMPT": prompt,
        "OPENCRAB_SESSION_ID": session_id,
        "OPENCRAB_TASK_ID": task.id,
        "PATH": extra_env.get("PATH", os.environ.get("PATH", os.defpath)),
    }
    launch = clis.prepare(
        profile,
        executable=executable,
        home=folder / "home",
        workdir=Path(worktree.path),
        signal_dir=signal_dir,
        endpoint=endpoint,
        prompt=prompt,
        full_auto=state.full_auto,
        extra_env=extra,
    )
    pane = await tmux.open_pane(
        launch.argv,
        cwd=launch.cwd,
        env=launch.env,
        labels={"session": session_id, "task": task.id},
        name=task.id,
    )
    if launch.paste_prompt and profile.agent_type != "Other":
        await tmux.send_text(pane.pane_id, prompt)
    return Opened(pane, launch, profile, worktree, created)
