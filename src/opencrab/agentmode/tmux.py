"""OpenCrab's own tmux server: one pane per sub-agent, its input, output, exit and end.

The server is private (`tmux -L <socket>`, one per OpenCrab instance: see
`instance.tmux_socket`; no user configuration read), started on demand with
`remain-on-exit on`, so a pane whose program ended stays with its exit status and last
screen until OpenCrab removes it. A pane runs its argv through `paneexec` (no shell:
quotes, `$(...)`, newlines reach the program as they are), so the pane's pid is the
program's own pid. Each pane carries user options `@opencrab_<label>` (task, session,
...) so panes left by a crashed run are found again.

    server = TmuxServer("opencrab")
    pane = await server.open_pane(["claude", "--yes"], cwd=worktree, env=env,
                                  labels={"task": "task-001"})
    await server.send_text(pane.pane_id, "日本語の答え")
    state = await server.pane_state(pane.pane_id)
    await server.terminate(pane.pane_id)

Process trees are found through /proc (Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opencrab.errors import ConflictError, OpenCrabError

SESSION = "opencrab"
"""The tmux session holding every sub-agent window."""
LABEL_PREFIX = "@opencrab_"
PANEEXEC = str(Path(__file__).with_name("paneexec.py"))
FIELD_SEP = "\x1f"
RUN_DIR_OPTION = "@opencrab-run"
"""Pane option: the directory holding the launcher's pid and exit files."""
PID_OPTION = "@opencrab-pid"
"""Pane option: the program's own pid (the launcher's child)."""
RUN_DIR_HOLE = f"#{{{RUN_DIR_OPTION}}}"


class TmuxError(OpenCrabError):
    """A tmux command failed; the message has the command and tmux's own words."""

    code = "tmux_error"


class PaneEnded(ConflictError):
    """A task's pane is gone or its program has ended: nothing can be typed into it."""

    code = "pane_ended"


@dataclass(frozen=True)
class Pane:
    """A sub-agent's pane: its tmux id (`%5`) and the program's own pid."""

    pane_id: str
    pid: int


@dataclass(frozen=True)
class PaneState:
    """Whether a pane's program ended, and how (exit code, or the signal that killed it)."""

    pane_id: str
    pid: int
    dead: bool
    exit_status: int | None = None
    exit_signal: int | None = None


@dataclass(frozen=True)
class PaneInfo:
    """A pane as `list_panes` sees it: id, pid, state and its `@opencrab_*` labels."""

    pane_id: str
    pid: int
    dead: bool
    exit_status: int | None
    exit_signal: int | None
    window_name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Terminated:
    """What `terminate` ended: the pids signalled, and any that survived SIGKILL."""

    signalled: list[int]
    survivors: list[int]


class TmuxServer:
    """A private tmux server addressed by its socket name (`tmux -L socket`)."""

    def __init__(self, socket: str = "opencrab", *, tmux: str = "tmux") -> None:
        self.socket = socket
        self.tmux = tmux
        self._start_lock = asyncio.Lock()

    async def run(self, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        """Run one tmux command on this server and return its output (TmuxError on failure)."""
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        proc = await asyncio.create_subprocess_exec(
            self.tmux,
            "-L",
            self.socket,
            "-f",
            os.devnull,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await proc.communicate(stdin)
        if check and proc.returncode != 0:
            words = err.decode("utf-8", "replace").strip()
            raise TmuxError(f"tmux -L {self.socket} {args[0]} failed: {words}")
        return out.decode("utf-8", "replace")

    async def is_running(self) -> bool:
        """Whether this socket's server is up."""
        try:
            await self.run("list-sessions")
        except TmuxError:
            return False
        return True

    async def server_pid(self) -> int | None:
        """The server process's pid, or None when it is not running."""
        try:
            out = await self.run("display-message", "-p", "#{pid}")
        except TmuxError:
            return None
        return int(out.strip())

    async def ensure_server(self) -> None:
        """Start the server with its session when it is not running (remain-on-exit on)."""
        async with self._start_lock:
            if await self._has_session():
                return
            # One command sequence: the options hold before the first pane exists.
            await self.run(
                "start-server",
                ";",
                "set-option",
                "-g",
                "remain-on-exit",
                "on",
                ";",
                "set-option",
                "-g",
                "history-limit",
                "20000",
                ";",
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-x",
                "200",
                "-y",
                "50",
                "-n",
                "opencrab",
                "--",
                "tail",
                "-f",
                "/dev/null",
            )

    async def _has_session(self) -> bool:
        try:
            await self.run("has-session", "-t", f"={SESSION}")
        except TmuxError:
            return False
        return True

    async def open_pane(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> Pane:
        """Open a window running `argv` in `cwd` with exactly `env` (default: ours)."""
        if not argv:
            raise TmuxError("open_pane needs a program to run (argv is empty)")
        for key in labels or {}:
            if not re.fullmatch(r"[A-Za-z0-9_]+", key):
                raise TmuxError(f"label {key!r}: use letters, digits and _ only")
        await self.ensure_server()
        run_dir = Path(tempfile.mkdtemp(prefix="opencrab-pane-"))  # mode 0700
        launch = {
            "argv": list(argv),
            "cwd": str(cwd),
            "env": dict(os.environ if env is None else env),
            "pid_file": str(run_dir / "pid"),
            "exit_file": str(run_dir / "exit"),
        }
        launch_file = run_dir / "launch.json"
        fd = os.open(launch_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(launch, handle)
        try:
            out = await self.run(
                "new-window",
                "-d",
                "-P",
                "-F",
                "#{pane_id}",
                "-t",
                f"={SESSION}:",
                "-n",
                name or Path(argv[0]).name,
                "-c",
                str(cwd),
                "--",
                sys.executable,
                "-I",
                "-S",
                PANEEXEC,
                str(launch_file),
            )
        except TmuxError:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        pane_id = out.strip()
        pid = await _read_pid(run_dir / "pid", run_dir / "exit")
        await self._set_options(pane_id, {RUN_DIR_OPTION: str(run_dir), PID_OPTION: str(pid)})
        if labels:
            await self.set_labels(pane_id, labels)
        return Pane(pane_id=pane_id, pid=pid)

    async def _set_options(self, pane_id: str, options: Mapping[str, str]) -> None:
        args: list[str] = []
        for option, value in options.items():
            if args:
                args.append(";")
            args += ["set-option", "-p", "-t", pane_id, option, value]
        await self.run(*args)

    async def set_labels(self, pane_id: str, labels: Mapping[str, str]) -> None:
        """Set `@opencrab_<key>` user options on a pane."""
        await self._set_options(pane_id, {f"{LABEL_PREFIX}{k}": v for k, v in labels.items()})

    async def send_text(self, pane_id: str, text: str, *, enter_delay: float = 0.05) -> None:
        """Type `text` into a pane as one bracketed paste, then press Enter separately.

        The text goes through a tmux buffer loaded from stdin (never a command line), is
        pasted with bracket codes when the program asked for bracketed paste, and Enter is
        its own key after `enter_delay`. Trailing newlines are dropped (Enter ends it).
        """
        buffer = f"opencrab-{uuid.uuid4().hex[:12]}"
        body = text.rstrip("\r\n").encode("utf-8")
        await self.run("load-buffer", "-b", buffer, "-", stdin=body)
        await self.run("paste-buffer", "-p", "-d", "-b", buffer, "-t", pane_id)
        await asyncio.sleep(enter_delay)
        await self.run("send-keys", "-t", pane_id, "Enter")

    async def press_keys(self, pane_id: str, keys: str) -> None:
        """Type `keys` as key presses (not a paste, no Enter): a TUI's menu takes a
        number key as its choice, where a paste of the same text is ignored."""
        await self.run("send-keys", "-t", pane_id, "-l", keys)

    async def press_named_keys(self, pane_id: str, *keys: str, gap: float = 0.1) -> None:
        """Press tmux's named keys one by one (e.g. "Down", "Enter"), `gap` seconds
        apart, so a TUI reads each as its own key press."""
        for number, key in enumerate(keys):
            if number:
                await asyncio.sleep(gap)
            await self.run("send-keys", "-t", pane_id, key)

    async def capture(self, pane_id: str, lines: int = 200) -> str:
        """The pane's last `lines` lines of output (wrapped lines joined, blank tail cut)."""
        out = await self.run("capture-pane", "-p", "-J", "-t", pane_id, "-S", f"-{lines}")
        rows = out.rstrip("\n").split("\n")
        while rows and not rows[-1].strip():
            rows.pop()
        return "\n".join(rows[-lines:])

    async def pane_state(self, pane_id: str) -> PaneState:
        """Whether the pane's program has ended, with its exit code or killing signal."""
        fmt = FIELD_SEP.join(
            [
                "#{pane_pid}",
                "#{pane_dead}",
                "#{pane_dead_status}",
                "#{pane_dead_signal}",
                f"#{{{PID_OPTION}}}",
                f"#{{{RUN_DIR_OPTION}}}",
            ]
        )
        out = await self._display(pane_id, fmt)
        pane_pid, dead, status, sig, pid, run_dir = out.split(FIELD_SEP)
        return _state(pane_id, int(pid or pane_pid), dead == "1", status, sig, run_dir)

    async def _display(self, pane_id: str, fmt: str) -> str:
        """`fmt` (starting with #{pane_pid}) expanded for the pane; TmuxError when the pane is
        gone (tmux then expands it to empty fields and still succeeds)."""
        out = (await self.run("display-message", "-p", "-t", pane_id, fmt)).rstrip("\n")
        if not out.partition(FIELD_SEP)[0]:
            raise TmuxError(f"tmux -L {self.socket}: pane {pane_id} is gone")
        return out

    async def list_panes(self) -> list[PaneInfo]:
        """Every sub-agent pane of this server with its labels (empty when it is down)."""
        if not await self._has_session():
            return []
        fmt = FIELD_SEP.join(
            [
                "#{pane_id}",
                "#{pane_pid}",
                "#{pane_dead}",
                "#{pane_dead_status}",
                "#{pane_dead_signal}",
                f"#{{{PID_OPTION}}}",
                f"#{{{RUN_DIR_OPTION}}}",
                "#{window_index}",
                "#{window_name}",
            ]
        )
        out = await self.run("list-panes", "-s", "-t", f"={SESSION}", "-F", fmt)
        panes: list[PaneInfo] = []
        for line in out.splitlines():
            pane_id, pane_pid, dead, status, sig, pid, run_dir, index, window = line.split(
                FIELD_SEP
            )
            if index == "0":  # the session's own keeper window
                continue
            state = _state(pane_id, int(pid or pane_pid), dead == "1", status, sig, run_dir)
            try:
                labels = await self._labels(pane_id)
            except TmuxError:
                continue  # removed since the listing (a cleanup or cancel elsewhere)
            panes.append(
                PaneInfo(
                    pane_id=pane_id,
                    pid=state.pid,
                    dead=state.dead,
                    exit_status=state.exit_status,
                    exit_signal=state.exit_signal,
                    window_name=window,
                    labels=labels,
                )
            )
        return panes

    async def _labels(self, pane_id: str) -> dict[str, str]:
        out = await self.run("show-options", "-p", "-t", pane_id)
        labels: dict[str, str] = {}
        for line in out.splitlines():
            name, _, raw = line.partition(" ")
            if name.startswith(LABEL_PREFIX):
                labels[name[len(LABEL_PREFIX) :]] = await self._option(pane_id, name, raw)
        return labels

    async def _option(self, pane_id: str, name: str, raw: str) -> str:
        if not raw.startswith('"'):
            return raw
        # tmux quotes values with special characters; -v prints the value as stored
        out = await self.run("show-options", "-p", "-v", "-t", pane_id, name)
        return out[:-1] if out.endswith("\n") else out

    async def terminate(self, pane_id: str, *, grace: float = 3.0) -> Terminated:
        """End the pane's program and its whole process tree: SIGTERM, then SIGKILL after
        `grace`. The launcher (paneexec.py) is left to see its child end, write the exit
        record and end the same way, so the pane's end is always known; before the
        program's pid is recorded, the launcher's tree is ended instead."""
        fmt = f"#{{pane_pid}}{FIELD_SEP}#{{{PID_OPTION}}}"
        try:
            out = await self._display(pane_id, fmt)
        except TmuxError:
            return Terminated(signalled=[], survivors=[])
        launcher, program = out.split(FIELD_SEP)
        return await asyncio.to_thread(kill_tree, int(program or launcher), grace)

    async def kill_pane(self, pane_id: str, *, grace: float = 3.0) -> Terminated:
        """Terminate the pane's process tree, then remove the pane and its run files."""
        ended = await self.terminate(pane_id, grace=grace)
        with contextlib.suppress(TmuxError):
            run_dir = await self.run("display-message", "-p", "-t", pane_id, RUN_DIR_HOLE)
            await self.run("kill-pane", "-t", pane_id)
            if run_dir.strip():
                shutil.rmtree(run_dir.strip(), ignore_errors=True)
        return ended

    async def kill_server(self, *, grace: float = 3.0) -> Terminated:
        """End every pane's process tree, stop the server and remove its socket file."""
        signalled: list[int] = []
        survivors: list[int] = []
        for pane in await self.list_panes():
            ended = await self.kill_pane(pane.pane_id, grace=grace)
            signalled += ended.signalled
            survivors += ended.survivors
        with contextlib.suppress(TmuxError):
            socket_path = (await self.run("display-message", "-p", "#{socket_path}")).strip()
            await self.run("kill-server")
            if socket_path and not await self.is_running():
                with contextlib.suppress(OSError):
                    os.unlink(socket_path)  # tmux can leave it behind
        return Terminated(signalled=signalled, survivors=survivors)


async def _read_pid(pid_file: Path, exit_file: Path, timeout: float = 30.0) -> int:
    """The program's pid as the launcher wrote it (TmuxError if it never does)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int(pid_file.read_text())
        if exit_file.exists():
            break
        await asyncio.sleep(0.01)
    raise TmuxError(f"the pane launcher never wrote the program's pid ({pid_file})")


def _state(pane_id: str, pid: int, dead: bool, status: str, sig: str, run_dir: str) -> PaneState:
    """A PaneState from tmux's fields, completed by the launcher's exit file."""
    if dead and status:
        return PaneState(pane_id, pid, dead=True, exit_status=int(status))
    if dead and sig:
        return PaneState(pane_id, pid, dead=True, exit_signal=int(sig))
    if dead and run_dir:  # tmux missed the exit (a program that ended at once)
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(Path(run_dir, "exit").read_text())
            return PaneState(
                pane_id,
                pid,
                dead=True,
                exit_status=record.get("status"),
                exit_signal=record.get("signal"),
            )
    # Alive, or the pty closed before tmux reaped the launcher: not ended yet.
    return PaneState(pane_id, pid, dead=False)


@dataclass(frozen=True)
class ProcEntry:
    """One live process as /proc shows it; `start` tells it from a later one with its pid."""

    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot (/proc/PID/stat field 22)


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on; the name before is cut at its last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process now holding `pid` started (clock ticks after boot); None if none."""
    fields = _stat_fields(pid)
    return None if fields is None or fields[0] == "Z" else int(fields[19])


def _proc_table() -> dict[int, ProcEntry]:
    """pid → its entry, for every live process (/proc; zombies hold nothing)."""
    table: dict[int, ProcEntry] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is None or fields[0] == "Z":  # a zombie's parent reaps it
            continue
        table[int(entry.name)] = ProcEntry(
            int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
        )
    return table


def _tree_in(table: Mapping[int, ProcEntry], root: int) -> set[int]:
    found = {pid for pid, e in table.items() if root in (e.pgid, e.sid)}
    if root in table:
        found.add(root)
    grew = True
    while grew:
        children = {pid for pid, e in table.items() if e.ppid in found}
        grew = not children <= found
        found |= children
    found.discard(os.getpid())
    return found


def process_tree(root: int) -> set[int]:
    """`root`, its descendants, and every process still in its session or process group."""
    return _tree_in(_proc_table(), root)


def tree_snapshot(root: int, known: Mapping[int, int] | None = None) -> dict[int, int]:
    """`root`'s process tree as pid → start time, added to `known` (a pid already known
    keeps its first start time). Once `root`'s pid holds another process than the known
    root, only the known processes count (a reused pid does not bring its own tree)."""
    table = _proc_table()
    seen = dict(known or {})
    root_start = seen.get(root)
    entry = table.get(root)
    if root_start is None or entry is None or entry.start == root_start:
        for pid in _tree_in(table, root):
            seen.setdefault(pid, table[pid].start)
    return seen


def signal_processes(processes: Mapping[int, int], sig: signal.Signals) -> list[int]:
    """Send `sig` to each pid still held by the process it names (pid → start time as
    first seen); a pid that died and was reused by another process is left alone. The
    pid is pinned by a pidfd before its start time is checked, so it cannot be reused
    between the check and the signal."""
    sent: list[int] = []
    for pid, start in processes.items():
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # gone (ProcessLookupError) or not ours to open
            continue
        try:
            if start_time(pid) != start:
                continue
            signal.pidfd_send_signal(pidfd, sig)
        except OSError:  # it ended meanwhile, or is not ours to signal
            continue
        finally:
            os.close(pidfd)
        sent.append(pid)
    return sent


def _still_running(processes: Mapping[int, int]) -> dict[int, int]:
    table = _proc_table()
    return {p: s for p, s in processes.items() if p in table and table[p].start == s}


def kill_tree(root: int, grace: float = 3.0) -> Terminated:
    """SIGTERM `root`'s process tree, SIGKILL what is left after `grace`, report survivors.
    Each process is known by its pid and start time, so a pid reused meanwhile is spared."""
    signalled: set[int] = set()
    known = tree_snapshot(root)
    signalled |= set(signal_processes(known, signal.SIGTERM))
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        known = tree_snapshot(root, known)
        if not _still_running(known):
            break
        time.sleep(0.05)
    for _ in range(20):
        known = tree_snapshot(root, known)
        left = _still_running(known)
        if not left:
            break
        signalled |= set(signal_processes(left, signal.SIGKILL))
        time.sleep(0.05)
    survivors = sorted(_still_running(tree_snapshot(root, known)))
    return Terminated(signalled=sorted(signalled), survivors=survivors)
