"""`make run` on a fresh checkout says what it is doing before each long step, and
a second run prints nothing but the server's own start.

The real Makefile runs in a temporary copy of the tree whose `.venv/bin/python` and
`.venv/bin/opencrab` are stand-ins that record how they were called.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$(dirname "$0")/../../calls.log"\n'


def tree(tmp_path: Path) -> Path:
    """A copy of the files the install recipes read, with a recording stand-in venv."""
    work = tmp_path / "checkout"
    (work / "requirements").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", work)
    shutil.copy(ROOT / "pyproject.toml", work)
    for lock in ("run.lock", "dev.lock"):
        shutil.copy(ROOT / "requirements" / lock, work / "requirements")
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "opencrab"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(0o755)
    return work


def make(work: Path, *targets: str) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", *targets],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout + done.stderr


def test_the_first_make_run_says_what_takes_long_and_lets_pip_show_progress(
    tmp_path: Path,
) -> None:
    work = tree(tmp_path)
    out = make(work, "run")
    lines = out.splitlines()
    pip = next(i for i, line in enumerate(lines) if "-r requirements/run.lock" in line)
    before = "\n".join(lines[:pip])
    assert "==> Installing the runtime dependencies (requirements/run.lock)" in before
    assert "llama-cpp-python" in before
    assert "5-12 minutes" in before
    assert "not hung" in before
    calls = (work / "calls.log").read_text().splitlines()
    lock_install = next(c for c in calls if "requirements/run.lock" in c)
    assert "--quiet" not in lock_install  # pip names each package and spins while building
    assert "==> .venv is ready" in out
    assert calls[-1] == "opencrab up --host 127.0.0.1 --port 8080 --data-dir ./data"


def test_the_second_make_run_prints_nothing_extra(tmp_path: Path) -> None:
    work = tree(tmp_path)
    make(work, "run")
    again = make(work, "run")
    assert again.splitlines() == [
        ".venv/bin/opencrab up --host 127.0.0.1 --port 8080 --data-dir ./data"
    ]
    calls = (work / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["python", "python", "opencrab", "opencrab"]


def test_make_test_prepares_the_dev_environment_the_same_way(tmp_path: Path) -> None:
    work = tree(tmp_path)
    out = make(work, "-n", "test")  # what it would run, without running it
    assert "requirements/dev.lock" in out
    assert "5-12 minutes" in out
