"""The data directory is its owner's alone: 0700, the database files and secret.key 0600,
from the first command on (whatever the umask), and tightened when found looser."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from opencrab.auth import TokenStore
from opencrab.config.secret_key import SecretBox
from opencrab.store import Database

EXE = str(Path(sys.executable).parent / "opencrab")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI under the usual umask 022 (which would leave files world-readable)."""
    return subprocess.run(
        [EXE, *args], env=env, capture_output=True, text=True, umask=0o022, timeout=120
    )


def test_a_fresh_data_directory_is_owner_only(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data"
    made = run(env, "token", "create", "first", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    assert mode(data) == 0o700
    assert mode(data / "opencrab.db") == 0o600
    umask = os.umask(0o022)
    try:  # the server's own writes: SQLite's side files, the key for stored API keys
        SecretBox.load(data, create=True, env={})
        db = Database(f"sqlite:///{data / 'opencrab.db'}")
        try:
            TokenStore(db).create("second")
            assert mode(data / "opencrab.db-wal") == 0o600
            assert mode(data / "opencrab.db-shm") == 0o600
        finally:
            db.close()
    finally:
        os.umask(umask)
    assert mode(data / "secret.key") == 0o600
    assert "tightened" not in made.stderr  # nothing was ever looser


def test_looser_modes_are_tightened_at_start_and_said(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data"
    assert run(env, "token", "create", "first", "--data-dir", str(data)).returncode == 0
    (data / "secret.key").write_bytes(b"not a key, but kept as it is\n")
    loose = {
        data: 0o755,
        data / "opencrab.db": 0o644,
        data / "secret.key": 0o644,
    }
    for path, wide in loose.items():
        path.chmod(wide)
    listed = run(env, "token", "list", "--json", "--data-dir", str(data))
    assert listed.returncode == 0, listed.stderr
    assert '"first"' in listed.stdout  # nothing stored was lost
    assert mode(data) == 0o700
    assert mode(data / "opencrab.db") == 0o600
    assert mode(data / "secret.key") == 0o600
    assert (data / "secret.key").read_bytes() == b"not a key, but kept as it is\n"
    said = " ".join(listed.stderr.split())
    assert f"tightened {data}: 0755 -> 0700" in said
    assert f"tightened {data / 'secret.key'}: 0644 -> 0600" in said
    again = run(env, "token", "list", "--data-dir", str(data))
    assert "tightened" not in again.stderr  # once is enough
