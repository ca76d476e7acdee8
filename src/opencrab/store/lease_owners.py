"""Lease owners: a process's name as a lease owner, and whether the process it names is gone.

An owner is `host:pid:place.random`: the host name and pid for people, `place` a short
digest of this boot of the machine and of the pid namespace (the pids it can see), and a
random part (pids are reused). A process that sees the same place sees the owner's pid:
when no process has it any more (or only a zombie), the owner is gone, and its leases
need not wait for their expiry (store.leases). An owner from another machine, another
boot, another container or of another shape is never judged gone: its leases expire.

    owner_gone("build-1:4242:3f9a0c1e.5d2b7e90aa41")  # True once pid 4242 here is gone
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid

BOOT_ID = "/proc/sys/kernel/random/boot_id"
PID_NAMESPACE = "/proc/self/ns/pid"


def _place() -> str:
    """This boot and pid namespace as 8 hex digits ("" where /proc cannot tell)."""
    try:
        with open(BOOT_ID, encoding="ascii") as handle:
            boot = handle.read().strip()
        namespace = os.stat(PID_NAMESPACE)
    except OSError:
        return ""
    seen = f"{boot}:{namespace.st_dev}:{namespace.st_ino}"
    return hashlib.sha256(seen.encode()).hexdigest()[:8]


PLACE = _place()


def process_owner() -> str:
    """A new owner name for this process: `host:pid:place.random`."""
    return f"{socket.gethostname()}:{os.getpid()}:{PLACE}.{uuid.uuid4().hex[:12]}"


def owner_gone(owner: str) -> bool:
    """Whether `owner` names a process of this machine and pid namespace that is gone."""
    host, _, rest = owner.partition(":")
    pid, _, tail = rest.partition(":")
    place, dot, _ = tail.partition(".")
    if not PLACE or not dot or place != PLACE or host != socket.gethostname():
        return False
    if not pid.isdigit() or int(pid) <= 0:
        return False
    return not _running(int(pid))


def _running(pid: int) -> bool:
    """Whether a process (not a zombie) has `pid`."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, but not ours to read
    return stat[stat.rfind(")") + 2 :].split()[:1] != ["Z"]
