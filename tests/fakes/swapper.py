"""A hostile process that swaps a folder and a symlink, over and over (issue 31 §2).

What a command run by execute_command can do inside its workspace: `renameat2(…,
RENAME_EXCHANGE)` puts a symlink where a folder was, and back, atomically, millions of
times a second. A jail that checks a path and then opens it by name loses that race.
The swapper is its own process (ctypes on libc, no GIL shared with the test) and counts
its swaps, so a test can show the race was really run.

Example:
    with Swapper(root / "d", root / "l") as swapper:
        ...  # read and write "d/…" through the workspace
    assert swapper.swaps > 0
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

_SWAP_LOOP = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
first, second = (os.fsencode(name) for name in sys.argv[1:3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
swaps = 0
def stop(*_):
    print(swaps, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    if libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE) != 0:
        print("renameat2:", os.strerror(ctypes.get_errno()), file=sys.stderr, flush=True)
        os._exit(1)
    swaps += 1
"""


class Swapper:
    """Exchanges `first` and `second` (a folder and a symlink) until stopped."""

    def __init__(self, first: Path, second: Path) -> None:
        self.first = first
        self.second = second
        self.swaps = 0
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Swapper:
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", _SWAP_LOOP, str(self.first), str(self.second)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":
            self._process.kill()
            _, err = self._process.communicate(timeout=60)
            raise RuntimeError(f"the swapper did not start: {err.strip()}")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process = self._process
        assert process is not None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        if process.returncode != 0:
            raise RuntimeError(f"the swapper failed: {err.strip()}")
        self.swaps = int(out.split()[-1])
