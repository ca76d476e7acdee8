"""Fixtures for the CLI tests."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def make_unwritable() -> Iterator[Callable[..., None]]:
    """Make files and folders unwritable, even for root (chattr +i), until the test ends."""
    done: list[tuple[Path, int]] = []

    def unwritable(*paths: Path) -> None:
        for path in paths:
            mode = path.stat().st_mode
            path.chmod(stat.S_IMODE(mode) & ~0o222)
            if os.geteuid() == 0:  # root writes through permissions; not through +i
                subprocess.run(["chattr", "+i", str(path)], check=True)
            done.append((path, mode))

    yield unwritable
    for path, mode in reversed(done):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(stat.S_IMODE(mode))
