"""Agent-mode cleanup: finished tasks' worktrees and branches, orphaned panes and
worktrees. A worktree is removed (with its branch and its tasks' panes) only when every
task that works in it is finished (a task that failed before its worktree was recorded
on the session, as when merging its dependencies conflicted, still counts as the
session's) and its work is merged into the start branch or pushed; otherwise the refusal
and its reason are reported (`force` removes it anyway). Orphans are panes of OpenCrab's
tmux server whose labels name an unknown session or a task that is not running, and
worktrees OpenCrab made under `.worktrees/` (marked when made, or on a branch a
session's task recorded) that no session knows (`worktrees.find_orphans`): a worktree
the user made there is never one, even with `force`. Orphans are only reported unless
removal is asked for. Disk use per worktree is reported.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from opencrab.agentmode import worktrees
from opencrab.agentmode.model import AgentSession, MessageRole, TaskStatus
from opencrab.agentmode.runstate import RunState
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.states import TASK_FINAL
from opencrab.agentmode.tmux import TmuxError, TmuxServer
from opencrab.errors import ConflictError, OpenCrabError


@dataclass
class CleanupReport:
    """What cleanup removed, refused (and why), and the orphans it found or removed."""

    removed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    orphan_panes: list[str] = field(default_factory=list)
    orphan_worktrees: list[str] = field(default_factory=list)
    orphans_removed: bool = False
    disk_bytes: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        """The report with camelCase keys (the API's shape)."""
        return {
            "removed": self.removed,
            "refused": self.refused,
            "orphanPanes": self.orphan_panes,
            "orphanWorktrees": self.orphan_worktrees,
            "orphansRemoved": self.orphans_removed,
            "diskBytes": self.disk_bytes,
        }


async def clean_session(
    session: AgentSession, state: RunState, tmux: TmuxServer, *, force: bool
) -> CleanupReport:
    """Remove the worktrees of `session` whose tasks are all finished (edits `session`),
    those of tasks that failed before their worktree was recorded included."""
    report = CleanupReport()
    repo = Path(session.repository_path)
    usage = await worktrees.worktrees_disk_usage(repo)
    report.disk_bytes = {str(p): n for p, n in usage.items()}
    for branch in [w.branch_name for w in session.worktrees] + await _unrecorded(session, state):
        users = [t for t in session.tasks if state.branches.get(t.id) == branch]
        if any(t.status not in TASK_FINAL for t in users):
            continue  # still to run, or running in it
        try:
            await worktrees.remove_worktree(repo, branch, state.start_branch, force=force)
        except ConflictError as refused:
            report.refused[branch] = str(refused)
            continue
        for task in users:
            if task.sub_agent is not None:
                with contextlib.suppress(TmuxError):
                    await tmux.kill_pane(task.sub_agent.pane_id)
        session.worktrees = [w for w in session.worktrees if w.branch_name != branch]
        report.removed.append(branch)
    if report.removed:
        note = f"Cleaned up: {', '.join(report.removed)}."
        session.conversation.add(MessageRole.SYSTEM, note)
    return report


async def _unrecorded(session: AgentSession, state: RunState) -> list[str]:
    """Branches of the session's finished tasks whose worktree was made but never
    recorded on the session: the task failed before its sub-agent started (a merge of
    its dependencies conflicted, the CLI could not be opened)."""
    recorded = {w.branch_name for w in session.worktrees}
    found: list[str] = []
    for task in session.tasks:
        branch = state.branches.get(task.id)
        if not branch or branch in recorded or branch in found or task.status not in TASK_FINAL:
            continue
        if await worktrees.worktree_missing(session.repository_path, branch) is None:
            found.append(branch)
    return found


async def find_orphans(
    service: AgentModeService,
    tmux: TmuxServer,
    session: AgentSession,
    report: CleanupReport,
    *,
    remove: bool,
    force: bool,
) -> None:
    """Add orphaned panes and worktrees (of `session`'s repository) to `report`; with
    `remove`, kill those panes and remove those worktrees (unsaved work refused)."""
    report.orphans_removed = remove
    repo = Path(session.repository_path)
    sessions: dict[str, AgentSession] = {}
    known_branches: set[str] = set()
    recorded: set[str] = set()  # branches OpenCrab made worktrees on for this repository
    for row in service.list(limit=10000):
        with contextlib.suppress(OpenCrabError):
            other = service.get(row.id)
            sessions[row.id] = other
            if Path(other.repository_path) == repo:
                known_branches |= {w.branch_name for w in other.worktrees}
                recorded |= {
                    t.assigned_worktree.branch_name
                    for t in other.tasks
                    if t.assigned_worktree is not None
                }
    for pane in await tmux.list_panes():
        owner = sessions.get(pane.labels.get("session", ""))
        task = owner.task(pane.labels.get("task", "")) if owner is not None else None
        if task is None or task.status is not TaskStatus.RUNNING:
            report.orphan_panes.append(pane.pane_id)
            if remove:
                await tmux.kill_pane(pane.pane_id)
    found = await worktrees.find_orphans(repo, known_branches, recorded)
    report.orphan_worktrees = [str(e.path) for e in found.worktrees]
    report.orphan_worktrees += [str(p) for p in found.stray_dirs]
    if not remove:
        return
    start = (await worktrees.git(repo, "rev-parse", "--abbrev-ref", "HEAD")).strip()
    for entry in found.worktrees:
        if entry.branch is None:
            continue
        try:
            await worktrees.remove_worktree(repo, entry.branch, start, force=force)
        except ConflictError as refused:
            report.refused[entry.branch] = str(refused)
    if found.prunable:
        await worktrees.prune(repo)
