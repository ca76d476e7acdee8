"""Git worktrees for sub-agents: create, merge dependencies, diff, measure, clean up.

Every operation that changes a repository's worktrees or branches runs under that
repository's lock: an asyncio lock keyed by the repository's real path (one process) and
an `flock` on `<git common dir>/opencrab-worktrees.lock` (several processes).

A worktree lives at `{repo}/.worktrees/{branch with "/" as "-"}` (seed 004's example:
`agent/jwt-auth` → `.worktrees/agent-jwt-auth`) and `.worktrees/` is listed once in
`.git/info/exclude`. Cleanup never deletes work that is neither merged into the start
branch nor pushed to its upstream unless forced. A worktree OpenCrab makes is marked by a
file in its git admin dir (`<git common dir>/worktrees/<name>/opencrab-worktree`, out of
the work tree, so it is never committed); only marked worktrees, or those on a branch
OpenCrab recorded in its session files, are ever orphans: a worktree the user made under
`.worktrees/` is never listed nor removed.

    wt = await create_worktree(repo, "agent/jwt-auth", "main", merge=["agent/db"])
    diff = await worktree_diff(wt.path, "main")
    await remove_worktree(repo, "agent/jwt-auth", "main")
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opencrab.errors import ConflictError, OpenCrabError

WORKTREES_DIR = ".worktrees"
EXCLUDE_LINE = ".worktrees/"
MARKER = "opencrab-worktree"
"""The file in a worktree's git admin dir that says OpenCrab made it (it holds the branch)."""
DEFAULT_DIFF_BYTES = 512_000
IDENTITY = ("-c", "user.name=OpenCrab", "-c", "user.email=opencrab@localhost")
"""Used for merge commits only when the repository has no identity of its own."""

_locks: dict[str, asyncio.Lock] = {}


class GitError(OpenCrabError):
    """A git command failed; the message has the command and git's own words."""

    code = "git_error"


class MergeConflict(ConflictError):
    """A dependency branch does not merge cleanly into a task's new branch."""

    code = "merge_conflict"

    def __init__(self, branch: str, dependency: str, files: Sequence[str]) -> None:
        self.branch = branch
        self.dependency = dependency
        self.files = list(files)
        where = ", ".join(self.files) or "unknown files"
        super().__init__(f"merging {dependency} into {branch} conflicts in {where}")


class CleanupRefused(ConflictError):
    """Removing a worktree would lose work that is neither merged nor pushed."""

    code = "cleanup_refused"


@dataclass(frozen=True)
class Worktree:
    """A worktree: its branch and path."""

    branch: str
    path: Path


@dataclass(frozen=True)
class Diff:
    """A worktree's changes against its start branch (committed and not)."""

    stat: str
    files_changed: int
    insertions: int
    deletions: int
    patch: str
    truncated: bool


@dataclass(frozen=True)
class WorktreeEntry:
    """One line of `git worktree list`: path, branch, and why git could prune it."""

    path: Path
    branch: str | None
    prunable: str | None = None


@dataclass(frozen=True)
class Orphans:
    """Leftovers of a crashed run: unknown worktrees, stray dirs, stale git entries."""

    worktrees: list[WorktreeEntry] = field(default_factory=list)
    stray_dirs: list[Path] = field(default_factory=list)
    prunable: list[WorktreeEntry] = field(default_factory=list)


def worktree_path(repo: str | os.PathLike[str], branch: str) -> Path:
    """Where the worktree of `branch` lives: `{repo}/.worktrees/{branch, / as -}`."""
    return Path(repo) / WORKTREES_DIR / branch.replace("/", "-")


async def git(cwd: str | os.PathLike[str], *args: str, check: bool = True) -> str:
    """Run git in `cwd` and return its stdout (GitError naming the command on failure)."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        words = err.decode("utf-8", "replace").strip()
        raise GitError(f"git {' '.join(args)} (in {cwd}) failed: {words}")
    return out.decode("utf-8", "replace")


async def _common_dir(repo: Path) -> Path:
    out = await git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(out.strip())


@contextlib.asynccontextmanager
async def repo_lock(repo: str | os.PathLike[str]) -> AsyncIterator[Path]:
    """Hold the repository's worktree lock (in-process and cross-process); yields its path."""
    real = Path(os.path.realpath(repo))
    lock = _locks.setdefault(str(real), asyncio.Lock())
    async with lock:
        path = await _common_dir(real) / "opencrab-worktrees.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            yield real
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


async def ensure_excluded(repo: Path) -> None:
    """Add `.worktrees/` to the repository's `info/exclude` unless it is there."""
    exclude = await _common_dir(repo) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text("utf-8") if exclude.exists() else ""
    if EXCLUDE_LINE in text.splitlines():
        return
    sep = "" if not text or text.endswith("\n") else "\n"
    exclude.write_text(f"{text}{sep}{EXCLUDE_LINE}\n", "utf-8")


async def _identity(repo: Path) -> tuple[str, ...]:
    email = await git(repo, "config", "--get", "user.email", check=False)
    return () if email.strip() else IDENTITY


async def create_worktree(
    repo: str | os.PathLike[str],
    branch: str,
    start_branch: str,
    *,
    merge: Sequence[str] = (),
) -> Worktree:
    """A new branch from `start_branch` in its own worktree, with `merge` branches merged in.

    A merge that conflicts is aborted (the worktree stays clean, on what merged so far)
    and MergeConflict names both branches and the files.
    """
    async with repo_lock(repo) as real:
        await ensure_excluded(real)
        path = worktree_path(real, branch)
        if path.exists():
            raise GitError(f"worktree path {path} already exists (branch {branch})")
        await git(real, "worktree", "add", "-q", "-b", branch, str(path), start_branch)
        await _mark(path, branch)
        identity = await _identity(real) if merge else ()
        for dependency in merge:
            message = f"Merge {dependency} into {branch}"
            done = await _merge(path, identity, dependency, message)
            if not done:
                out = await git(path, "diff", "--name-only", "--diff-filter=U")
                files = out.split()
                await git(path, "merge", "--abort", check=False)
                raise MergeConflict(branch, dependency, files)
        return Worktree(branch=branch, path=path)


async def _mark(path: Path, branch: str) -> None:
    """Write MARKER into the new worktree's git admin dir (never into its work tree)."""
    admin = Path((await git(path, "rev-parse", "--absolute-git-dir")).strip())
    (admin / MARKER).write_text(f"{branch}\n", "utf-8")


async def marked_worktrees(repo: str | os.PathLike[str]) -> set[Path]:
    """The work trees (real paths) whose git admin dir holds MARKER: those OpenCrab made."""
    admin_root = await _common_dir(Path(repo)) / "worktrees"

    def scan() -> set[Path]:
        found: set[Path] = set()
        if not admin_root.is_dir():
            return found
        for admin in admin_root.iterdir():
            try:
                if not (admin / MARKER).is_file():
                    continue
                dot_git = (admin / "gitdir").read_text("utf-8").strip()
            except OSError:
                continue
            found.add(Path(os.path.realpath(Path(dot_git).parent)))
        return found

    return await asyncio.to_thread(scan)


async def _merge(path: Path, identity: tuple[str, ...], dependency: str, message: str) -> bool:
    proc = await asyncio.create_subprocess_exec(
        "git",
        *identity,
        "merge",
        "--no-ff",
        "--no-edit",
        "-m",
        message,
        dependency,
        cwd=str(path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    _, err = await proc.communicate()
    if proc.returncode == 0:
        return True
    unmerged = await git(path, "ls-files", "--unmerged")
    if unmerged.strip():
        return False
    raise GitError(f"git merge {dependency} (in {path}) failed: {err.decode().strip()}")


async def worktree_diff(
    path: str | os.PathLike[str], start_branch: str, *, max_bytes: int = DEFAULT_DIFF_BYTES
) -> Diff:
    """The worktree's changes since it left `start_branch`: commits, edits, new files.

    Read through a copy of the index (the worktree's own index is not touched), so
    uncommitted and untracked files count; the patch is cut at `max_bytes`.
    """
    base = (await git(path, "merge-base", "HEAD", start_branch)).strip()
    index = Path(
        (await git(path, "rev-parse", "--path-format=absolute", "--git-path", "index")).strip()
    )
    with tempfile.TemporaryDirectory(prefix="opencrab-diff-") as tmp:
        temp_index = Path(tmp) / "index"
        if index.exists():
            shutil.copyfile(index, temp_index)
        env = {**os.environ, "GIT_INDEX_FILE": str(temp_index), "LC_ALL": "C"}

        async def run(*args: str, limit: int | None = None) -> tuple[str, bool]:
            proc = await asyncio.create_subprocess_exec(
                "git",
                *args,
                cwd=str(path),
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert proc.stdout is not None
            if limit is None:
                out, err = await proc.communicate()
                if proc.returncode != 0:
                    raise GitError(f"git {' '.join(args)} (in {path}) failed: {err.decode()}")
                return out.decode("utf-8", "replace"), False
            data = await proc.stdout.read(limit + 1)
            cut = len(data) > limit
            if cut:
                proc.kill()
            await proc.wait()
            return data[:limit].decode("utf-8", "ignore"), cut

        await run("add", "-A")
        stat, _ = await run("diff", "--cached", "--stat", base)
        numstat, _ = await run("diff", "--cached", "--numstat", base)
        patch, truncated = await run("diff", "--cached", "--no-color", base, limit=max_bytes)
    files = insertions = deletions = 0
    for line in numstat.splitlines():
        added, removed, _name = line.split("\t", 2)
        files += 1
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return Diff(
        stat=stat.rstrip("\n"),
        files_changed=files,
        insertions=insertions,
        deletions=deletions,
        patch=patch,
        truncated=truncated,
    )


def disk_usage(path: str | os.PathLike[str]) -> int:
    """Bytes a directory tree takes on disk (blocks, hard links once, symlinks not followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total


async def worktrees_disk_usage(repo: str | os.PathLike[str]) -> dict[Path, int]:
    """Bytes used by each directory under `{repo}/.worktrees/` (sum them for the total)."""
    root = Path(repo) / WORKTREES_DIR

    def measure() -> dict[Path, int]:
        if not root.is_dir():
            return {}
        return {p: disk_usage(p) for p in sorted(root.iterdir()) if p.is_dir()}

    return await asyncio.to_thread(measure)


async def list_worktrees(repo: str | os.PathLike[str]) -> list[WorktreeEntry]:
    """Every worktree git knows for the repository (the main one included)."""
    out = await git(repo, "worktree", "list", "--porcelain")
    entries: list[WorktreeEntry] = []
    for block in out.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" not in fields:
            continue
        branch = fields.get("branch")
        entries.append(
            WorktreeEntry(
                path=Path(fields["worktree"]),
                branch=branch.removeprefix("refs/heads/") if branch else None,
                prunable=(fields["prunable"] or "prunable") if "prunable" in fields else None,
            )
        )
    return entries


async def unsaved_work(repo: str | os.PathLike[str], branch: str, start_branch: str) -> str | None:
    """Why removing `branch` would lose work (None when it is merged or pushed and clean)."""
    path = worktree_path(repo, branch)
    if path.is_dir():
        status = await git(path, "status", "--porcelain", "--untracked-files=normal")
        if status.strip():
            count = len(status.splitlines())
            return f"worktree {path} has {count} uncommitted change(s)"
    if await _is_ancestor(repo, branch, start_branch):
        return None
    upstream = (
        await git(repo, "rev-parse", "--abbrev-ref", f"{branch}@{{upstream}}", check=False)
    ).strip()
    if upstream and await _is_ancestor(repo, branch, upstream):
        return None
    where = f"nor pushed to {upstream}" if upstream else "and has no upstream it was pushed to"
    return f"branch {branch} is not merged into {start_branch} {where}"


async def _is_ancestor(repo: str | os.PathLike[str], commit: str, of: str) -> bool:
    proc = await asyncio.create_subprocess_exec(
        "git",
        "merge-base",
        "--is-ancestor",
        commit,
        of,
        cwd=str(repo),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await proc.wait() == 0


async def remove_worktree(
    repo: str | os.PathLike[str], branch: str, start_branch: str, *, force: bool = False
) -> None:
    """Remove `branch`'s worktree and the branch; CleanupRefused when work would be lost."""
    async with repo_lock(repo) as real:
        if not force:
            reason = await unsaved_work(real, branch, start_branch)
            if reason:
                raise CleanupRefused(f"{reason}; merge or push it, or clean up with force")
        path = worktree_path(real, branch)
        if path.exists():
            await git(real, "worktree", "remove", "--force", str(path))
        await git(real, "worktree", "prune")
        await git(real, "branch", "-D", branch)


async def find_orphans(
    repo: str | os.PathLike[str], known_branches: Iterable[str], recorded: Iterable[str] = ()
) -> Orphans:
    """Worktrees OpenCrab made under `.worktrees/` (marked, or on a branch in `recorded`)
    whose branch is not known, stray dirs, stale entries. Any other worktree is the
    user's: never an orphan, whatever its branch."""
    real = Path(os.path.realpath(repo))
    known = set(known_branches)
    ours = set(recorded)
    root = real / WORKTREES_DIR
    entries = await list_worktrees(real)
    marked = await marked_worktrees(real)
    registered = {Path(os.path.realpath(e.path)) for e in entries}
    orphans = Orphans()
    for entry in entries:
        if entry.prunable is not None:
            orphans.prunable.append(entry)
        elif entry.path.parent == root and entry.branch not in known:
            at = Path(os.path.realpath(entry.path))
            made = at in marked or entry.branch in ours
            if made and entry.branch is not None and at == worktree_path(real, entry.branch):
                orphans.worktrees.append(entry)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and Path(os.path.realpath(child)) not in registered:
                orphans.stray_dirs.append(child)
    return orphans


async def prune(repo: str | os.PathLike[str]) -> None:
    """Drop git's records of worktrees whose directories are gone (`git worktree prune`)."""
    async with repo_lock(repo) as real:
        await git(real, "worktree", "prune")


async def worktree_missing(repo: str | os.PathLike[str], branch: str) -> str | None:
    """Why `branch`'s worktree cannot be used any more (None when it is there and checked out)."""
    path = worktree_path(os.path.realpath(repo), branch)
    if not path.is_dir():
        return f"worktree {path} of {branch} is gone"
    for entry in await list_worktrees(repo):
        if Path(os.path.realpath(entry.path)) == Path(os.path.realpath(path)):
            if entry.prunable is not None:
                return f"worktree {path} is stale: {entry.prunable}"
            if entry.branch != branch:
                return f"worktree {path} has {entry.branch or 'a detached HEAD'}, not {branch}"
            return None
    return f"worktree {path} is not a worktree of {repo} any more"
