"""A finished task's work: committed on its branch, its diff, a pull request or the local
branch, and the coding CLI's transcript imported into the metrics.

- `commit_all`: the CLI may leave its edits uncommitted; they are committed on the task's
  branch (so dependants can merge them and cleanup can tell merged from unmerged).
- `open_pull_request`: when `gh` is on PATH and the repository has a remote, the branch
  is pushed and `gh pr create` opens a pull request against the start branch; otherwise
  (or when that fails) the local branch is the delivery and the reason is given.
- `import_transcripts`: the CLI's transcripts in the sub-agent's HOME through
  `Importer(db, "claude" | "codex")` (incremental, so importing again is cheap), or, for
  Gemini CLI's chats and OpenCode's database, their token usage alone
  (`importers.gemini.import_usage`, `importers.opencode.import_usage`: stored once per
  model call), under the agent id given (the runner uses the master agent's id).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opencrab.agentmode import worktrees
from opencrab.agentmode.model import PullRequestRef
from opencrab.agentmode.runstate import TaskOutcome
from opencrab.agentmode.worktrees import git
from opencrab.importers import gemini, opencode
from opencrab.importers.common import UsageImport
from opencrab.importers.store import Importer
from opencrab.offload import run_blocking
from opencrab.store import Database

log = logging.getLogger(__name__)
PR_URL = re.compile(r"https?://\S+/pull/(\d+)")
SHOWN_PROBLEMS = 5  # the unreadable lines or messages logged one by one; the rest counted
UsageOnly = Callable[..., UsageImport]
USAGE_ONLY: dict[str, tuple[UsageOnly, str]] = {  # source: (its usage import, what it reads)
    gemini.SOURCE: (gemini.import_usage, "Gemini CLI chats"),
    opencode.SOURCE: (opencode.import_usage, "OpenCode's database"),
}
IDENTITY = ("-c", "user.name=OpenCrab", "-c", "user.email=opencrab@localhost")


@dataclass(frozen=True)
class Delivery:
    """Where a task's work went: a pull request, or the local branch and why."""

    pull_request: PullRequestRef | None
    text: str


async def deliver_work(
    repo: Path,
    worktree: Path,
    branch: str,
    start_branch: str,
    task: tuple[str, str],
    summary: str,
    patch: Path,
) -> tuple[TaskOutcome, PullRequestRef | None]:
    """A finished task's work delivered (`task`: its id and name): everything committed,
    its diff against `start_branch` written to `patch`, then a pull request, or the
    local branch; what happened, and the pull request when one was opened. A failure is
    logged and said in the outcome's `delivery` (the task did finish; its delivery did
    not)."""
    outcome = TaskOutcome(branch=branch)
    try:
        task_id, name = task
        await commit_all(worktree, f"{task_id}: {name}\n\n{summary}")
        diff = await worktrees.worktree_diff(worktree, start_branch)
        patch.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        patch.write_text(diff.patch, encoding="utf-8")
        outcome = TaskOutcome(
            branch=branch,
            diff_stat=diff.stat,
            files_changed=diff.files_changed,
            insertions=diff.insertions,
            deletions=diff.deletions,
            patch_file=str(patch),
        )
        delivery = await open_pull_request(repo, worktree, branch, start_branch, name, summary)
    except Exception as error:
        log.exception("agent-mode: delivering %s failed", branch)
        outcome.delivery = f"local branch {branch} (delivering failed: {error})"
        return outcome, None
    outcome.delivery = delivery.text
    pull = delivery.pull_request
    outcome.pull_request_url = None if pull is None else pull.url
    return outcome, pull


async def commit_all(worktree: Path, message: str) -> bool:
    """Commit every change in the worktree (new files included); False when clean."""
    status = await git(worktree, "status", "--porcelain", "--untracked-files=normal")
    if not status.strip():
        return False
    await git(worktree, "add", "-A")
    email = (await git(worktree, "config", "user.email", check=False)).strip()
    identity = () if email else IDENTITY
    await git(worktree, *identity, "commit", "-q", "--no-verify", "-m", message)
    return True


async def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "GH_PROMPT_DISABLED": "1", "GIT_TERMINAL_PROMPT": "0"},
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", "replace").strip()


async def open_pull_request(
    repo: Path, worktree: Path, branch: str, start_branch: str, title: str, body: str
) -> Delivery:
    """Push `branch` and open a pull request with `gh` when it is installed and the repo
    has a remote; else the local branch, with the reason."""
    gh = shutil.which("gh")
    remotes = (await git(repo, "remote", check=False)).split()
    if gh is None or not remotes:
        why = "gh is not installed" if gh is None else "the repository has no remote"
        return Delivery(None, f"local branch {branch} ({why})")
    remote = "origin" if "origin" in remotes else remotes[0]
    code, out = await _run(["git", "push", "-q", "-u", remote, f"{branch}:{branch}"], worktree)
    if code != 0:
        return Delivery(None, f"local branch {branch} (git push to {remote} failed: {out})")
    argv = [gh, "pr", "create", "--head", branch, "--base", start_branch]
    code, out = await _run([*argv, "--title", title, "--body", body], worktree)
    found = PR_URL.search(out)
    if code != 0 or found is None:
        return Delivery(None, f"branch {branch} pushed to {remote} (gh pr create failed: {out})")
    url = found[0]
    return Delivery(PullRequestRef(number=int(found[1]), url=url), f"pull request {url}")


def _import(db: Database, source: str, folder: Path, agent_id: str | None) -> int:
    if source in USAGE_ONLY:
        import_usage, what = USAGE_ONLY[source]
        usage = import_usage(db, [folder], agent_id=agent_id)
        for problem in usage.problems[:SHOWN_PROBLEMS]:
            log.warning("agent-mode: not imported from %s: %s", what, problem)
        if len(usage.problems) > SHOWN_PROBLEMS:
            more = len(usage.problems) - SHOWN_PROBLEMS
            log.warning("agent-mode: %d more parts of %s not imported", more, what)
        return usage.files
    summary = Importer(db, source, agent_id=agent_id).run([folder])
    files = summary.as_json().get("files", 0)
    return int(files) if isinstance(files, int) else 0


async def import_transcripts(
    db: Database, source: str | None, folder: Path | None, agent_id: str | None
) -> int:
    """Import the CLI's transcripts under `folder` (files imported; 0 when it has none)."""
    if source is None or folder is None or not folder.is_dir():
        return 0
    return await run_blocking(_import, db, source, folder, agent_id)
