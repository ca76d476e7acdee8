"""The first program of a sub-agent's tmux pane: start the CLI, record its pid and exit.

    python -I -S paneexec.py LAUNCH_FILE

The launch file (JSON, mode 0600, written by `tmux.TmuxServer.open_pane`) holds the
argv, the working directory, the complete environment and two paths: where to write the
program's pid and where to write its exit. This program deletes the launch file (keys do
not stay on disk), starts the argv as its child with `os.execvpe` (no shell ever parses an
argument), writes the child's pid, waits for it, writes `{"status": N}` or
`{"signal": N}` to the exit file, and ends the same way (tmux's `pane_dead_status` agrees).
The exit file is the record tmux can miss when a program ends within milliseconds.
Stdlib only: it runs with -I -S, before anything of OpenCrab is importable.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

FORWARDED = (signal.SIGTERM, signal.SIGHUP)
"""Signals for this launcher that the program gets too (terminal keys reach both)."""


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    """Run the launch file's program as a child; end as it ended."""
    if len(argv) != 1:
        print("usage: python -I -S paneexec.py LAUNCH_FILE", file=sys.stderr)
        return 2
    path = argv[0]
    try:
        with open(path, encoding="utf-8") as handle:
            launch = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"opencrab: cannot read the launch file {path}: {exc}", file=sys.stderr)
        return 127
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    args = [str(a) for a in launch["argv"]]
    env = {str(k): str(v) for k, v in launch["env"].items()}
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP):
        signal.signal(sig, signal.SIG_IGN)  # the program, in our process group, gets these
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.chdir(launch["cwd"])
            os.execvpe(args[0], args, env)  # noqa: S606 - the argv is the caller's program
        except OSError as exc:
            print(f"opencrab: cannot start {args[0]!r} in {launch['cwd']}: {exc}", file=sys.stderr)
        os._exit(127)
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, _frame: os.kill(pid, signum))
    _write(launch["pid_file"], str(pid))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            status = 127 << 8
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        killer = os.WTERMSIG(status)
        _write(launch["exit_file"], json.dumps({"signal": killer}))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(killer, signal.SIG_DFL)
        os.kill(os.getpid(), killer)
        return 128 + killer
    code = os.waitstatus_to_exitcode(status)
    _write(launch["exit_file"], json.dumps({"status": code}))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
