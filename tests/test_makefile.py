"""`make run` on a fresh checkout says what it is doing before each long step, and
a second run prints nothing but the server's own start.

The real Makefile runs in a temporary copy of the tree whose `.venv/bin/python` and
`.venv/bin/opencrab` are stand-ins that record how they were called.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

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
    (work / "clis").mkdir()
    for manifest in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "clis" / manifest, work / "clis")
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


def make_postgres(work: Path, *variables: str, env: dict[str, str] | None = None) -> Any:
    """`make postgres` in the copy, with the given variable overrides."""
    environ = {k: v for k, v in os.environ.items() if k != "OPENCRAB_TEST_PG_URL"}
    return subprocess.run(
        ["make", "--no-print-directory", "postgres", *variables],
        cwd=work,
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
    )


def fake_apt(work: Path) -> Path:
    """An apt-get stand-in that records its arguments."""
    apt = work / "apt-get"
    apt.write_text('#!/bin/sh\necho "apt-get $*" >> "$(dirname "$0")/apt.log"\n')
    apt.chmod(0o755)
    return apt


def test_make_test_ensures_the_postgresql_server_binaries(tmp_path: Path) -> None:
    work = tree(tmp_path)
    out = make(work, "-n", "test")
    assert "OPENCRAB_TEST_PG_URL" in out
    assert "initdb" in out
    binaries = tmp_path / "pg" / "15" / "bin"
    binaries.mkdir(parents=True)
    (binaries / "initdb").touch()
    found = make_postgres(work, f"PG_BINDIRS={tmp_path}/pg/*/bin")
    assert (found.returncode, found.stdout, found.stderr) == (0, "", "")


def test_make_installs_postgresql_with_apt_as_root(tmp_path: Path) -> None:
    work = tree(tmp_path)
    apt = fake_apt(work)
    done = make_postgres(work, f"PG_BINDIRS={tmp_path}/none/*/bin", f"APT_GET={apt}", "AS_ROOT=yes")
    assert done.returncode == 0
    assert "==> Installing postgresql for the PostgreSQL tests" in done.stdout
    calls = (work / "apt.log").read_text().splitlines()
    assert calls == ["apt-get update -q", "apt-get install -y -q postgresql"]


def test_make_says_what_to_install_when_it_cannot(tmp_path: Path) -> None:
    work = tree(tmp_path)
    apt = fake_apt(work)
    done = make_postgres(work, f"PG_BINDIRS={tmp_path}/none/*/bin", f"APT_GET={apt}", "AS_ROOT=")
    assert done.returncode != 0
    assert "sudo apt-get install postgresql" in done.stderr
    assert "OPENCRAB_TEST_PG_URL" in done.stderr
    assert not (work / "apt.log").exists()
    given = make_postgres(
        work,
        f"PG_BINDIRS={tmp_path}/none/*/bin",
        "AS_ROOT=",
        env={"OPENCRAB_TEST_PG_URL": "postgresql://u@localhost/x"},
    )
    assert (given.returncode, given.stderr) == (0, "")


def test_make_test_installs_bubblewrap_for_the_sandbox_tests(tmp_path: Path) -> None:
    work = tree(tmp_path)
    assert "bwrap" in make(work, "-n", "test")
    apt = fake_apt(work)
    missing = f"BWRAP={tmp_path}/no-bwrap"
    done = subprocess.run(
        ["make", "--no-print-directory", "sandbox", missing, f"APT_GET={apt}", "AS_ROOT=yes"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "==> Installing bubblewrap for the sandbox tests" in done.stdout
    calls = (work / "apt.log").read_text().splitlines()
    assert calls == ["apt-get update -q", "apt-get install -y -q bubblewrap"]
    refused = subprocess.run(
        ["make", "--no-print-directory", "sandbox", missing, f"APT_GET={apt}", "AS_ROOT="],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "sudo apt-get install bubblewrap" in refused.stderr


def test_make_test_installs_tmux_and_git_for_the_agent_mode_tests(tmp_path: Path) -> None:
    work = tree(tmp_path)
    assert "tmux" in make(work, "-n", "test")
    apt = fake_apt(work)
    missing = f"TMUX_BIN={tmp_path}/no-tmux"

    def agentmode(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "agentmode", missing, f"APT_GET={apt}", *args],
            cwd=work,
            capture_output=True,
            text=True,
        )

    done = agentmode("AS_ROOT=yes")
    assert done.returncode == 0, done.stderr
    assert "==> Installing tmux git for the agent-mode tests" in done.stdout
    calls = (work / "apt.log").read_text().splitlines()
    assert calls == ["apt-get update -q", "apt-get install -y -q tmux git"]
    refused = agentmode("AS_ROOT=")
    assert refused.returncode != 0
    assert "sudo apt-get install tmux git" in refused.stderr
    present = subprocess.run(
        ["make", "--no-print-directory", "agentmode", f"APT_GET={apt}", "AS_ROOT="],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert (present.returncode, present.stdout, present.stderr) == (0, "", "")


def test_make_test_installs_the_pinned_coding_clis_once(tmp_path: Path) -> None:
    work = tree(tmp_path)
    npm = work / "npm"
    npm.write_text(
        '#!/bin/sh\necho "npm $*" >> ../npm.log\nmkdir -p node_modules/.bin\n'
        "for c in claude codex gemini opencode; do printf '#!/bin/sh\\necho %s ok\\n' $c"
        " > node_modules/.bin/$c; chmod +x node_modules/.bin/$c; done\n"
    )
    npm.chmod(0o755)
    assert "clis/package-lock.json" in make(work, "-n", "test")
    first = make(work, "clis", f"NPM={npm}")
    assert "==> Installing the coding CLIs" in first
    assert "claude ok" in first
    assert "codex ok" in first
    assert "gemini ok" in first
    assert "opencode ok" in first
    calls = (work / "npm.log").read_text().splitlines()
    assert calls == ["npm ci --include=optional --ignore-scripts=false --no-audit --no-fund"]
    assert make(work, "clis", f"NPM={npm}") == ""  # once installed, nothing runs again
    lock = json.loads((ROOT / "clis" / "package-lock.json").read_text())
    pinned = json.loads((ROOT / "clis" / "package.json").read_text())["dependencies"]
    for name, version in pinned.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
