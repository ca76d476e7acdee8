"""Seed 002's execute_command: a shell command in the agent's workspace, off by default.

The seed calls it "执行 shell 命令" (run a shell command) with one string `command`, so
the string is a shell command line: it runs as `/bin/sh -c COMMAND` (pipes, `&&` and
quoting work as in a terminal). What keeps that safe:

- it runs only for an agent an operator switched it on for (opencrab.actions.tool_settings);
- its folder is the agent's workspace; its environment is a fixed, scrubbed one (PATH,
  HOME, LANG, TMPDIR; nothing of the server's, so no keys);
- it is stopped at its timeout (`[tools] command_timeout_secs`, or less when the call
  asks) by killing its whole process group, and anything it left running is killed
  when it ends;
- stdout and stderr are each kept up to `[tools] command_max_output_bytes`;
- when the server runs as root it runs as an unprivileged uid (`[tools] command_uid`)
  with no capabilities, boxed or not (opencrab.actions.sandbox);
- it runs under limits on processes, memory, CPU time and file size
  (opencrab.actions.command_limits), and what it adds over the workspace's quota or
  file cap is removed when it ends and the call fails, naming the limit
  (opencrab.actions.command_files);
- with `[tools] sandbox = "auto"` (default) it runs inside bubblewrap when `bwrap` is
  installed: no network, its own process, IPC and UTS namespaces, the system's /usr and
  a few files of /etc read-only, a private size-limited /tmp, and only the workspace (as
  /workspace) writable. Without bubblewrap it runs unboxed and the result says so
  (`sandbox: "none"`, `warning`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.command_files import Before, Settled, prepare, settle
from opencrab.actions.command_limits import Rlimits, command_rlimits
from opencrab.actions.sandbox import SANDBOX_ROOT, CommandUser, bwrap_argv, command_user, write_etc
from opencrab.actions.tool_settings import require_enabled
from opencrab.actions.workspace import object_schema
from opencrab.config.models import ToolsSection
from opencrab.core.workspace import Workspace
from opencrab.errors import ValidationError
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl

log = logging.getLogger(__name__)

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UNBOXED_WARNING = (
    "bubblewrap (bwrap) is not installed, so the command ran without a sandbox: it could "
    "reach the network and read the server's files; install bubblewrap to box it"
)
_CHUNK = 65536
_DRAIN_SECS = 2.0  # after the command ends, how long its pipes may stay open


def command_env(home: str) -> dict[str, str]:
    """The whole environment a command gets: nothing of the server's."""
    return {"PATH": SAFE_PATH, "HOME": home, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}  # noqa: S108


def plan(
    limits: ToolsSection, user: CommandUser, workspace: Path, etc: Path, command: str
) -> tuple[list[str], str, str]:
    """(argv, the command's HOME, "bwrap" or "none") under the configured sandbox mode."""
    bwrap = shutil.which("bwrap") if limits.sandbox != "none" else None
    if bwrap is not None:
        argv = bwrap_argv(bwrap, limits, user, workspace, etc, command)
        return argv, SANDBOX_ROOT, "bwrap"
    if limits.sandbox == "bwrap":
        raise ValidationError(
            'execute_command is configured to run only in a sandbox ([tools] sandbox = "bwrap")'
            " but bubblewrap (bwrap) is not installed on this machine; ask the operator"
        )
    return ["/bin/sh", "-c", command], str(workspace), "none"


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    """Up to `cap` bytes of `stream`, reading (and dropping) the rest so it never blocks."""
    kept = bytearray()
    cut = False
    while chunk := await stream.read(_CHUNK):
        room = cap - len(kept)
        if len(chunk) > room:
            cut = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), cut


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_command(
    limits: ToolsSection, workspace: Workspace, command: str, timeout: float
) -> dict[str, Any]:
    """Run `command` as the module docstring says; the result the model sees."""
    user = command_user(limits)
    etc = Path(await run_blocking(tempfile.mkdtemp, prefix="opencrab-etc-"))
    try:
        before, rlimits, (argv, home, sandbox) = await run_blocking(
            _prepare, limits, workspace, user, etc, command
        )
        run_as = user if user.switched and sandbox == "none" else None  # boxed: setpriv's
        result = await _run(limits, argv, home, workspace.root, run_as, rlimits, timeout)
    finally:
        await run_blocking(shutil.rmtree, etc, ignore_errors=True)
    settled = await run_blocking(
        settle, workspace.root, before, workspace.max_size_bytes, workspace.max_files
    )
    workspace.usage_tracker.forget()  # it may have written anything: count again
    result = {"command": command, **result, "sandbox": sandbox}
    if settled.over is not None:
        result["quota_exceeded"] = True
        result["removed"] = settled.removed
        result["error"] = "; ".join(filter(None, [_over_quota(settled), result.get("error")]))
    if sandbox == "none":
        result["warning"] = UNBOXED_WARNING
        log.warning("execute_command ran without a sandbox: bubblewrap is not installed")
    return result


def _prepare(
    limits: ToolsSection, workspace: Workspace, user: CommandUser, etc: Path, command: str
) -> tuple[Before, Rlimits, tuple[list[str], str, str]]:
    """The blocking part before a run: its command line (refused first if there is none),
    the workspace counted and handed to `user`, its limits, the box's passwd and group."""
    planned = plan(limits, user, workspace.root, etc, command)
    before = prepare(workspace.root, (user.uid, user.gid) if user.switched else None)
    left = workspace.max_size_bytes - before.usage.bytes - workspace.usage_tracker.reserved.bytes
    rlimits = command_rlimits(limits, file_bytes=left, uid=user.uid)
    write_etc(user, etc)
    return before, rlimits, planned


def _over_quota(settled: Settled) -> str:
    """What the model reads when the run went over the quota or file cap."""
    removed = settled.removed
    shown = ", ".join(removed[:10])
    if len(removed) > 10:
        shown += f" and {len(removed) - 10} more"
    if removed:
        done = f"the {len(removed)} files it added last were removed, newest first: {shown}"
    else:
        done = "it added no file that could be removed"
    now = f"your workspace now holds {settled.usage.bytes} bytes in {settled.usage.files} files"
    return f"{settled.over}; {done}; {now}"


async def _run(
    limits: ToolsSection,
    argv: list[str],
    home: str,
    cwd: Path,
    run_as: CommandUser | None,
    rlimits: Rlimits,
    timeout: float,
) -> dict[str, Any]:
    """Start `argv` under `rlimits` (as `run_as` when given), wait up to `timeout`, kill
    its process group; exit code, output and whether it timed out."""
    switch: dict[str, Any] = {}
    if run_as is not None:  # setgroups, setregid, setreuid in the child, before exec
        switch = {"user": run_as.uid, "group": run_as.gid, "extra_groups": []}
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=command_env(home),
        start_new_session=True,  # its own process group, killed as one
        preexec_fn=rlimits.apply,  # setrlimit only, before exec
        **switch,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    cap = limits.command_max_output_bytes
    readers = [
        asyncio.ensure_future(_read_capped(process.stdout, cap)),
        asyncio.ensure_future(_read_capped(process.stderr, cap)),
    ]
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await process.wait()
    except TimeoutError:
        timed_out = True
    finally:
        _kill_group(process.pid)  # what it started in the background goes with it
        if process.returncode is None:
            await process.wait()
    done, pending = await asyncio.wait(readers, timeout=_DRAIN_SECS)
    for reader in pending:  # a process that left the group still holds the pipe
        reader.cancel()
    (out, out_cut), (err, err_cut) = (
        r.result() if r in done and not r.cancelled() else (b"", True) for r in readers
    )
    result: dict[str, Any] = {
        "exit_code": None if timed_out else process.returncode,
        "timed_out": timed_out,
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
    }
    if timed_out:
        result["error"] = (
            f"the command ran past its {timeout:g} s timeout and was killed, with every "
            "process it started"
        )
    return result


class ExecuteCommand(Action):
    name = "execute_command"
    description = (
        "Run a shell command line (/bin/sh -c) in your workspace folder; returns its exit "
        "code, stdout and stderr (each capped). Only for agents an operator switched it "
        "on for; it has a timeout and usually no network."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["command"],
        command={"type": "string", "minLength": 1, "maxLength": 10_000},
        timeout_secs={
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Stop it sooner than the server's limit ([tools] command_timeout_secs).",
        },
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await require_enabled(ctx, "execute_command")
        if "\x00" in args["command"]:
            return ActionResult.fail("command contains a NUL byte")
        limits = ctx.settings.tools
        timeout = min(
            float(args.get("timeout_secs", limits.command_timeout_secs)),
            limits.command_timeout_secs,
        )
        result = await run_command(limits, ctx.workspace, args["command"], timeout)
        if result.get("quota_exceeded"):
            return ActionResult(success=False, data=result, error=result["error"])
        return ActionResult.ok(result)


@hookimpl
def register_actions(register: Any) -> None:
    register(ExecuteCommand())
