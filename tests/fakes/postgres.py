"""A real PostgreSQL for the tests: `OPENCRAB_TEST_PG_URL`, or a throwaway cluster.

    with postgres_server() as server:
        url = server.create_database()   # a fresh, empty database
        Database(url).upgrade()

Without `OPENCRAB_TEST_PG_URL` the cluster is made with the machine's own PostgreSQL
binaries (/usr/lib/postgresql/*/bin, or `pg_config --bindir`) in a temporary folder,
listens only on a unix socket in that folder, and is stopped and removed at the end.
`initdb` refuses to run as root, so as root the cluster belongs to the `postgres` user.
With no binaries the tests fail with what to install (`make test` installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

ENV_URL = "OPENCRAB_TEST_PG_URL"
ROLE_PASSWORD = "opencrab-test"  # the roles `create_role` makes (a throwaway cluster trusts)
MISSING = (
    "the PostgreSQL tests need the PostgreSQL server binaries (initdb, pg_ctl): "
    "`sudo apt-get install postgresql` (make test installs them when run as root), "
    f"or set {ENV_URL} to a server the tests may create databases on"
)


def server_bindir() -> Path:
    """The folder holding initdb and pg_ctl (the newest installed version)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(bindir) / "initdb").is_file():
            return Path(bindir)
    if shutil.which("initdb"):
        return Path(str(shutil.which("initdb"))).parent
    raise RuntimeError(MISSING)


class PostgresServer:
    """A PostgreSQL server the tests may create and drop databases on."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = make_url(admin_url).set(drivername="postgresql+psycopg")
        self._admin = sa.create_engine(
            self.admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
        )
        self._made: list[str] = []
        self._roles: list[str] = []

    def create_database(self, *, owner: str | None = None) -> str:
        """A new empty database (from template0) and its URL; with `owner` (a role from
        `create_role`) the database is that role's and the URL logs in as it."""
        name = "opencrab_test_" + uuid.uuid4().hex[:12]
        owned = f' OWNER "{owner}"' if owner else ""
        with self._admin.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE DATABASE \"{name}\"{owned} TEMPLATE template0 ENCODING 'UTF8'"
            )
        self._made.append(name)
        url = self.admin_url.set(database=name)
        if owner:
            url = url.set(username=owner, password=ROLE_PASSWORD)
        return url.render_as_string(hide_password=False)

    def create_role(self) -> str:
        """A new login role that is no superuser (so it cannot create untrusted
        extensions such as pgvector's `vector`), dropped by `close`."""
        name = "opencrab_role_" + uuid.uuid4().hex[:12]
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{ROLE_PASSWORD}'")
        self._roles.append(name)
        return name

    def admin_connect(self, url: str) -> sa.Engine:
        """A superuser engine on the database at `url` (dispose it after use)."""
        name = make_url(url).database
        return sa.create_engine(
            self.admin_url.set(database=name),
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
        )

    def drop_database(self, url: str) -> None:
        """Drop a database made by `create_database`, closing whatever still uses it."""
        name = make_url(url).database
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._made:
            self._made.remove(name)

    def close(self) -> None:
        """Drop every database still left, and release the admin connection."""
        for name in list(self._made):
            self.drop_database(str(self.admin_url.set(database=name)))
        with self._admin.connect() as conn:
            for role in self._roles:
                conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
        self._roles.clear()
        self._admin.dispose()


@contextmanager
def postgres_server(url: str | None = None) -> Iterator[PostgresServer]:
    """The server at `url` (OPENCRAB_TEST_PG_URL), or a throwaway cluster till exit."""
    if url:
        server = PostgresServer(url)
        try:
            yield server
        finally:
            server.close()
        return
    with _throwaway_cluster() as admin_url:
        server = PostgresServer(admin_url)
        try:
            yield server
        finally:
            server.close()


@contextmanager
def _throwaway_cluster() -> Iterator[str]:
    """initdb + pg_ctl start in a temp folder; yields a superuser URL over its socket."""
    bindir = server_bindir()
    root = os.geteuid() == 0
    user = "postgres" if root else None
    with tempfile.TemporaryDirectory(prefix="opencrab-pg-") as tmp:
        folder = Path(tmp)
        data, socket_dir = folder / "data", folder / "run"
        data.mkdir()
        socket_dir.mkdir()
        if root:
            folder.chmod(0o755)
            shutil.chown(data, user)
            shutil.chown(socket_dir, user)
        as_owner = ["runuser", "-u", user, "--"] if user else []
        subprocess.run(
            [
                *as_owner,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{socket_dir}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        log = socket_dir / "server.log"
        started = subprocess.run(
            [
                *as_owner,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(log),
                "-w",
                "start",
            ],
            capture_output=True,
            text=True,
        )
        if started.returncode != 0:
            detail = log.read_text() if log.exists() else started.stderr
            raise RuntimeError(f"PostgreSQL did not start: {detail}")
        try:
            yield f"postgresql+psycopg://postgres@/postgres?host={socket_dir}"
        finally:
            subprocess.run(
                [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                capture_output=True,
            )
