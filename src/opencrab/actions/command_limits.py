"""The resource limits of one execute_command run, set in its first process before exec.

Every process the command starts inherits them:

- RLIMIT_NPROC: `[tools] command_max_processes` on top of the processes and threads its
  user runs already (the kernel counts them per user, whichever command they belong to);
  a root server's commands run as an unprivileged user (opencrab.actions.sandbox), so
  the limit holds for them too (root is never held to it);
- RLIMIT_AS: `[tools] command_max_memory_mb` of address space per process;
- RLIMIT_CPU: `[tools] command_max_cpu_secs` of CPU time per process (SIGXCPU, then
  SIGKILL a second later);
- RLIMIT_FSIZE: no file it writes grows past what is left of the workspace quota;
- RLIMIT_CORE: 0, so a crash dumps no core into the workspace.

The limits are lowered, hard and soft, so the command cannot raise them again.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from opencrab.config.models import ToolsSection

MB = 1024 * 1024


@dataclass(frozen=True)
class Rlimits:
    """(resource, soft, hard) triples; `apply` sets them in the child before it execs."""

    values: tuple[tuple[int, int, int], ...]

    def apply(self) -> None:
        """Set the limits on the calling process (a subprocess's preexec_fn)."""
        for which, soft, hard in self.values:
            resource.setrlimit(which, (soft, hard))

    def get(self, which: int) -> int:
        """The soft limit set for `which`."""
        return next(soft for res, soft, _ in self.values if res == which)


def command_rlimits(limits: ToolsSection, *, file_bytes: int, uid: int) -> Rlimits:
    """The limits of a command run as `uid` that may write files of up to `file_bytes`."""
    cpu = limits.command_max_cpu_secs
    wanted = (
        (resource.RLIMIT_NPROC, limits.command_max_processes + tasks_of(uid), None),
        (resource.RLIMIT_AS, limits.command_max_memory_mb * MB, None),
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, max(file_bytes, 0), None),
        (resource.RLIMIT_CORE, 0, None),
    )
    values = []
    for which, soft, hard in wanted:
        _, current = resource.getrlimit(which)  # never above what this process may set
        ceiling = soft if hard is None else hard
        if current != resource.RLIM_INFINITY:
            ceiling = min(ceiling, current)
        values.append((which, min(soft, ceiling), ceiling))
    return Rlimits(tuple(values))


def tasks_of(uid: int) -> int:
    """How many processes and threads have `uid` as their real uid (what RLIMIT_NPROC counts)."""
    count = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return 0
    with entries:
        for entry in entries:
            if entry.name.isdigit():
                count += _threads_if_uid(Path(entry.path, "status"), uid)
    return count


def _threads_if_uid(status: Path, uid: int) -> int:
    try:
        text = status.read_text()
    except OSError:
        return 0  # ended meanwhile
    real = threads = None
    for line in text.splitlines():
        if line.startswith("Uid:"):
            real = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return (threads or 1) if real == uid else 0
