"""The test watchdog (pyproject: faulthandler_timeout, faulthandler_exit_on_timeout): a
test that hangs ends the run with every thread's traceback instead of hanging CI."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HANGS = """
import threading

def test_never_ends():
    threading.Event().wait()  # nobody sets it


def test_after():
    pass
"""


def test_the_suite_is_configured_to_stop_a_hanging_test() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    assert 0 < float(ini["faulthandler_timeout"]) <= 600  # well inside CI's 60 minutes
    assert ini["faulthandler_exit_on_timeout"] is True


def test_a_hanging_test_is_stopped_with_every_threads_traceback(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGS)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfaulthandler_timeout = 2\nfaulthandler_exit_on_timeout = true\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Timeout (0:00:02)!" in done.stderr
    assert "in test_never_ends" in done.stderr  # the hanging test's frame is in the dump
    assert "passed" not in done.stdout  # the run stopped there
