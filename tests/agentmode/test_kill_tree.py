"""kill_tree knows each process by its pid AND start time: a pid of the tree that died
and was reused by an unrelated process (pid_max is 32768: pids wrap) is never signalled."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from opencrab.agentmode.tmux import kill_tree, signal_processes, start_time, tree_snapshot

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@contextlib.contextmanager
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts; each is killed and reaped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def successor(pid: int, old_start: int, started: list[subprocess.Popen[bytes]]) -> int:
    """A new, unrelated process; it holds `pid` itself when the kernel lets the test pick
    the next pid (ns_last_pid, as root), else the returned pid is another one. Either way
    it started at a later clock tick than the process that had `pid`."""
    for _ in range(200):
        with contextlib.suppress(OSError), open(NS_LAST_PID, "w") as handle:
            handle.write(str(pid - 1))  # the next fork gets pid
        proc = subprocess.Popen(SLEEPER, start_new_session=True)
        started.append(proc)
        if start_time(proc.pid) not in (None, old_start) and proc.pid == pid:
            return proc.pid
    proc = started[-1]
    assert start_time(proc.pid) not in (None, old_start)
    return proc.pid


def test_a_pid_that_died_and_was_reused_is_not_signalled() -> None:
    with sleepers() as started:
        old = subprocess.Popen(SLEEPER, start_new_session=True)
        seen = tree_snapshot(old.pid)  # what kill_tree reads first: pid -> start time
        assert list(seen) == [old.pid]
        old.kill()
        old.wait()  # reaped: its pid is free
        reused = successor(old.pid, seen[old.pid], started)
        recorded = {reused: seen[old.pid]}  # the pid as first seen, now another process

        assert signal_processes(recorded, signal.SIGKILL) == []
        assert started[-1].poll() is None  # the new holder of the pid lives on
        assert signal_processes({reused: start_time(reused) or 0}, signal.SIGTERM) == [reused]
        assert started[-1].wait() == -signal.SIGTERM


def test_kill_tree_ends_a_tree_and_spares_processes_outside_it() -> None:
    script = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(600)"
    with sleepers() as started:
        bystander = subprocess.Popen(SLEEPER, start_new_session=True)
        started.append(bystander)
        root = subprocess.Popen([sys.executable, "-c", script, *SLEEPER], start_new_session=True)
        started.append(root)
        while len(tree_snapshot(root.pid)) < 2:  # the child has started
            assert root.poll() is None
            time.sleep(0.02)
        tree = tree_snapshot(root.pid)

        ended = kill_tree(root.pid, grace=30.0)

        assert ended.survivors == []
        assert set(ended.signalled) == set(tree)
        assert root.wait() == -signal.SIGTERM
        assert bystander.poll() is None
