"""Shared fixtures: a temp data dir for every test, no stray config, no network; a real
PostgreSQL (tests/fakes/postgres.py) for the tests that run on both databases."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opencrab.config import Settings, load_settings
from opencrab.core import jail
from opencrab.event_log import EventLog
from opencrab.llm.registry import provider_facts
from opencrab.store import Database
from opencrab.store.repositories.memory_vectors import vector_store
from tests.fakes.postgres import ENV_URL, PostgresServer, postgres_server

# read before any test's data_dir fixture clears the OPENCRAB_* variables
TEST_PG_URL = os.environ.get(ENV_URL) or None

# The registered providers' key variables: a developer's real keys must not reach a test.
PROVIDER_KEYS = frozenset(f.key_env for f in provider_facts().values() if f.key_env)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _allowed(address):
        raise OSError(f"test tried to reach the network: {address!r}")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _allowed(address):
        raise OSError(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails the test."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own data directory, no provider keys, no OTEL_* variables (a
    developer's collector is never sent to) and no OPENCRAB_* settings but one: no
    background memory embedding."""
    for name in list(os.environ):
        if name.startswith(("OPENCRAB_", "OTEL_")) or name in PROVIDER_KEYS:
            monkeypatch.delenv(name)
    home = tmp_path / "data"
    monkeypatch.setenv("OPENCRAB_HOME", str(home))
    # no background embedding of memory (a model load and CPU in every served process,
    # and searches that turn hybrid at a moment of its choosing); tests of it turn it on
    monkeypatch.setenv("OPENCRAB_AGENT__MEMORY_EMBEDDING", "false")
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return load_settings()


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    database = Database(settings.database_url)
    database.upgrade()
    yield database
    database.close()


@pytest.fixture
def event_log(db: Database) -> EventLog:
    return EventLog(db)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this session: OPENCRAB_TEST_PG_URL, or a throwaway cluster."""
    with postgres_server(TEST_PG_URL) as server:
        yield server


@pytest.fixture
def pg_url(postgres: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    url = postgres.create_database()
    yield url
    postgres.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, settings: Settings) -> str:
    """A blank store's URL, once on SQLite (the data dir's file) and once on PostgreSQL."""
    if request.param == "sqlite":
        return settings.database_url
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def any_db(store_url: str) -> Iterator[Database]:
    """A migrated store on each database OpenCrab runs on (see `store_url`); on
    PostgreSQL with pgvector, which the migrations create (`make test` installs it)."""
    database = Database(store_url)
    database.upgrade()
    if database.dialect == "postgresql":
        store = vector_store(database)
        assert store.in_database, f"the PostgreSQL tests run with pgvector: {store.text}"
    yield database
    database.close()


@pytest.fixture(scope="session")
def _llm_server_session() -> Iterator[Any]:
    from tests.fakes.llm_server import running_server

    yield from running_server()


@pytest.fixture
def fake_llm_server(_llm_server_session: Any) -> Any:
    """A scripted LLM wire-format server on loopback (see tests/fakes/llm_server.py)."""
    _llm_server_session.reset()
    return _llm_server_session


@pytest.fixture(autouse=True)
def tmux_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test's own tmux socket for the agent-mode runner a server or CLI opens
    (`[agent_mode] tmux_socket` through the environment), so no test reaches the
    user's `tmux -L opencrab`; the tmux server, if one was started, is ended after."""
    import asyncio
    import uuid

    from opencrab.agentmode.tmux import TmuxServer

    name = f"oc-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("OPENCRAB_AGENT_MODE__TMUX_SOCKET", name)
    yield name
    socket_file = _tmux_folder() / name
    if socket_file.exists():
        asyncio.run(TmuxServer(name).kill_server())
        socket_file.unlink(missing_ok=True)


def _tmux_folder() -> Path:
    """Where tmux puts the sockets of this run (its TMUX_TMPDIR, private to the run)."""
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"


def _sockets(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir() if p.is_socket()}
    except OSError:
        return set()


@pytest.fixture(scope="session", autouse=True)
def _private_tmux_folder(request: pytest.FixtureRequest) -> Iterator[Path]:
    """The whole run's tmux servers live in a TMUX_TMPDIR of its own, so no test (nor a
    server or CLI a test starts) can reach, start or end the user's own tmux servers and
    their agent-mode panes. What the user has running is reported, never touched."""
    import tempfile

    users = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
    before = _sockets(users)
    private = Path(tempfile.mkdtemp(prefix="oc-tmux-", dir="/tmp"))  # short: socket paths
    saved = os.environ.get("TMUX_TMPDIR")
    os.environ["TMUX_TMPDIR"] = str(private)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if before and reporter is not None:
        reporter.write_line(
            f"tests leave alone the user's tmux sockets in {users}: {sorted(before)}"
        )
    try:
        yield private
    finally:
        if saved is None:
            os.environ.pop("TMUX_TMPDIR", None)
        else:
            os.environ["TMUX_TMPDIR"] = saved
        for name in sorted(_sockets(private / f"tmux-{os.getuid()}")):  # ours: end them
            subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True,
                           env=os.environ | {"TMUX_TMPDIR": str(private)})  # fmt: skip
        shutil.rmtree(private, ignore_errors=True)
        appeared = _sockets(users) - before
        if appeared and reporter is not None:  # the user's own, started meanwhile
            reporter.write_line(f"tmux sockets appeared in {users} during the run (left alone): "
                                f"{sorted(appeared)}")  # fmt: skip


@pytest.fixture(params=["openat2", "walk"])
def jail_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way the workspace jail resolves a path: openat2 (this kernel has it), then the
    O_NOFOLLOW walk of descriptors used where it has not (opencrab.core.jail)."""
    if request.param == "walk":
        monkeypatch.setattr(jail, "HAS_OPENAT2", False)
    else:
        assert jail.HAS_OPENAT2, "a kernel of 5.6 or later has openat2"
    return str(request.param)
