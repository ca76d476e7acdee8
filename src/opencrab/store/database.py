"""The database handle: one SQLAlchemy engine, read and write transactions, migrations."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import Pool

from opencrab.errors import ConfigError, StoreError
from opencrab.offload import run_blocking
from opencrab.store.dialects import postgresql as postgresql_dialect
from opencrab.store.dialects import sqlite as sqlite_dialect
from opencrab.store.dialects.postgresql import READ_BEGIN, WRITE_BEGIN
from opencrab.store.signals import take as take_signals

log = logging.getLogger(__name__)

DRIVERS = {"sqlite": "sqlite", "postgresql": "postgresql+psycopg"}
"""The backends OpenCrab runs on, and the driver each URL gets when it names none."""

P = ParamSpec("P")
T = TypeVar("T")

RETRY_PAUSES = (0.0, 0.001, 0.002, 0.004)
"""`Database.run` on SQLite: the pauses (s) before each try on the caller's thread; then
the work goes to a worker thread. A thread that holds the write lock but waits for the
interpreter (the caller's thread has it) would otherwise send every write after it to a
thread too, each holding the lock in its turn: a convoy."""

CHECKPOINT_EVERY = 64
"""Write transactions committed by `Database.run` on a caller's thread between two WAL
checkpoints, which run in a thread of their own (see `_Here`)."""


class Database:
    """A store reachable by SQLAlchemy URL: SQLite (files get WAL and a busy timeout) or
    PostgreSQL (`postgresql://…` uses psycopg 3; pooled connections, snapshot reads).

    A SQLite file in a folder this process cannot write is opened read-only (`read_only`):
    reading works, and writing or a pending migration raises ConfigError "data directory
    DIR is not writable"; with no database file there yet, opening raises it already.

    Example:
        db = Database("sqlite:///data/opencrab.db")
        db.upgrade()
        with db.write() as conn:
            conn.execute(tables.agents.insert(), {...})
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000) -> None:
        self.url = _checked_url(url)
        self._reading: ContextVar[Connection | None] = ContextVar(
            f"opencrab-read-{id(self)}", default=None
        )
        # connections idle between transactions, for reads and for writes: taken and
        # given back without SQLAlchemy's pool checkout/checkin (see `_transaction`)
        self._idle: dict[bool, deque[_Idle]] = {False: deque(), True: deque()}
        weakref.finalize(self, _close_idle, self._idle)
        self.read_only = False
        self.folder: Path | None = None  # the SQLite file's folder
        # channel -> what runs when a transaction that signalled it commits (signals.py)
        self._on_commit: dict[str, list[Callable[[], None]]] = {}
        # SQLite file: each thread's connection for writes that never wait (`run`)
        self._here: _Here | None = None
        if self.url.get_backend_name() == "sqlite":
            database = self.url.database or ""
            engine_url = self.url
            if database and database != ":memory:" and not self.url.query.get("uri"):
                path = Path(database)
                self.folder = path.parent
                self.read_only = not _writable(path)
                if self.read_only:
                    if not path.is_file():
                        raise self.not_writable()
                    engine_url = _read_only_url(path)
            self.engine: Engine = sa.create_engine(
                engine_url, connect_args={"timeout": busy_timeout_ms / 1000}
            )
            sqlite_dialect.configure(self.engine, busy_timeout_ms=busy_timeout_ms)
            if self.folder is not None and not self.read_only:
                self._here = _Here(self)
                weakref.finalize(self, _close_all, self._here.opened)
        else:
            self.engine = sa.create_engine(self.url, **postgresql_dialect.ENGINE_OPTIONS)
            postgresql_dialect.configure(self.engine)

    def on_commit(self, channel: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` (in the committing thread) whenever a write transaction of
        this Database that signalled `channel` commits (store/signals.py); returns the
        function that stops it."""
        callbacks = self._on_commit.setdefault(channel, [])
        callbacks.append(callback)
        return lambda: callbacks.remove(callback) if callback in callbacks else None

    @property
    def dialect(self) -> str:
        """The backend name, e.g. "sqlite" or "postgresql"."""
        return self.engine.dialect.name

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Store work `fn(*args, **kwargs)` from async code, without blocking the event
        loop on a lock or the disk.

        On PostgreSQL (every statement a round trip) it runs in a worker thread
        (offload.run_blocking). On a SQLite file it runs on the caller's thread when it
        can do so without waiting, which saves the hop to a worker thread and back
        (~100 µs of CPU, more than a turn's step writes): reads never wait under WAL,
        and the first write transaction takes the write lock only when it is free at
        once (its WAL checkpoints run in a thread of their own). When the lock is taken,
        it tries again after each of RETRY_PAUSES, then runs `fn` in a worker thread,
        which waits its turn. So `fn` must change nothing before its first write
        transaction begins (it may start again); a second write transaction of `fn`
        waits on the caller's thread when it must. Either way other coroutines run
        before it returns, and a caller cancelled meanwhile is told only once `fn` has
        run to its end (as with run_blocking).
        """
        if self._here is None or _HERE.get() is not None:
            return await run_blocking(fn, *args, **kwargs)
        cancelled = False
        for pause in RETRY_PAUSES:
            if pause:  # the lock's holder is most likely a thread of this process: let
                try:  # it have the interpreter and finish
                    await asyncio.sleep(pause)
                except asyncio.CancelledError:
                    cancelled = True  # told once the work is done
            token, would_wait = _HERE.set(_Attempt(self)), False
            try:
                done = fn(*args, **kwargs)
            except WouldWait:
                would_wait = True
            finally:
                _HERE.reset(token)
            if not would_wait:
                if cancelled:
                    raise asyncio.CancelledError
                # other coroutines run between two calls, as during a hop (a reply of a
                # thousand calls does not hold the loop); a cancellation lands after it
                await asyncio.sleep(0)
                return done
        # (run_blocking's copy of the context is reset: there it waits for the lock)
        done = await run_blocking(fn, *args, **kwargs)
        if cancelled:
            raise asyncio.CancelledError
        return done

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction (a consistent snapshot under WAL).

        Nested inside another `read()` of the same task it reuses the outer
        connection and snapshot, so code that makes many small reads (building an
        agent's context) can wrap them in one transaction without passing it around.
        """
        outer = self._reading.get()
        if outer is not None:
            yield outer
            return
        with self._transaction(write=False, begin=READ_BEGIN) as conn:
            token = self._reading.set(conn)
            try:
                yield conn
            finally:
                self._reading.reset(token)

    def reading(self) -> bool:
        """True inside a `read()` of this task (its snapshot is fixed)."""
        return self._reading.get() is not None

    @contextmanager
    def write(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A connection in a write transaction, committed on success, rolled back on error.

        `snapshot`: its reads, and those of every `read()` nested in it, see one snapshot
        (PostgreSQL: REPEATABLE READ; SQLite's write transaction is one already), so work
        that reads a lot and then writes (a turn's context and its first step) is one
        transaction instead of two.
        """
        if self.read_only:
            raise self.not_writable()
        begin = READ_BEGIN if snapshot else WRITE_BEGIN
        attempt = _HERE.get()
        if attempt is not None and attempt.db is self and not attempt.wrote:
            assert self._here is not None
            transaction = self._here.write(attempt)
        else:
            transaction = self._transaction(write=True, begin=begin)
        with transaction as conn:
            if not snapshot:
                yield conn
                return
            token = self._reading.set(conn)
            try:
                yield conn
            finally:
                self._reading.reset(token)

    @contextmanager
    def _transaction(self, *, write: bool, begin: str) -> Iterator[Connection]:
        """A transaction on a connection that is kept for the next one when it commits.

        Checking a connection out of SQLAlchemy's pool, wrapping it in a `Connection` and
        checking it back in costs more than an empty transaction; so a connection whose
        transaction committed waits in `_idle` (one list for reads, one for writes, which
        carry the execution option `write=True`) for the next transaction of any thread.
        As many are kept as ran at once, as the pool would hold. One whose transaction
        failed goes back to the pool (which rolls it back, or discards it when it is
        broken). On PostgreSQL one is taken only when it passes the checks the pool
        makes on checkout (dialects.postgresql.check_alive: not closed by the server,
        pinged after PING_AFTER_IDLE_SECS idle); one idle past REUSE_SECS, or from before
        `close()` or a disposal of the engine, goes back to the pool and another is
        checked out (so the pool's recycling still applies).
        """
        conn = self._reused(write)
        pool = self.engine.pool
        try:
            with conn.begin(), self._pipelined(conn, begin):
                yield conn
        except BaseException:
            take_signals(conn)  # rolled back: nothing happened
            conn.close()
            raise
        if write:
            self._committed(conn)
        if pool is self.engine.pool and not conn.invalidated:
            self._idle[write].append(_Idle(conn, pool, time.monotonic()))
        else:
            conn.close()

    def _committed(self, conn: Connection) -> None:
        """Call back whoever waits on a channel the committed transaction signalled."""
        if signalled := take_signals(conn):
            for channel in signalled:
                for callback in list(self._on_commit.get(channel, ())):
                    try:
                        callback()
                    except Exception:  # the write committed: a waiter's bug is not its
                        log.exception("a callback on %s failed", channel)

    def _reused(self, write: bool) -> Connection:
        """An idle connection still fit for use, else one checked out of the pool."""
        idle = self._idle[write]
        while idle:
            try:
                found = idle.pop()
            except IndexError:  # another thread took the last one
                break
            conn = found.conn
            idle_secs = time.monotonic() - found.since
            if self.dialect != "sqlite" and not postgresql_dialect.check_alive(conn, idle_secs):
                continue  # invalidated: the pool opens a new one
            if found.pool is not self.engine.pool or idle_secs > REUSE_SECS:
                conn.close()
                continue
            return conn
        conn = self._connect()
        if write:
            conn.execution_options(write=True)
        return conn

    def _pipelined(self, conn: Connection, begin: str) -> AbstractContextManager[None]:
        """On PostgreSQL the transaction's statements go in pipeline mode (fewer round
        trips: dialects.postgresql.transaction); SQLite's need nothing more."""
        if self.dialect == "sqlite":
            return nullcontext()
        return postgresql_dialect.transaction(conn, begin)

    def _connect(self) -> Connection:
        """A pooled connection; StoreError naming the server when it cannot be reached."""
        try:
            return self.engine.connect()
        except sa.exc.OperationalError as exc:
            if self.dialect == "sqlite":
                raise
            raise StoreError(
                f"cannot connect to the database {self.url.render_as_string()}: "
                f"{str(exc.orig).strip()}"
            ) from None

    def upgrade(self, revision: str = "head") -> None:
        """Apply migrations up to `revision` (read-only: only check that none is pending)."""
        from opencrab.store import migrate

        if self.read_only:
            current = self.current_revision()
            wanted = migrate.head() if revision == "head" else revision
            if current != wanted:
                raise self.not_writable(f"the database needs migrating: {current} → {wanted}")
            return
        migrate.upgrade(self, revision)

    def not_writable(self, why: str = "") -> ConfigError:
        """The error for a write to a database this process may only read."""
        detail = f"; {why}" if why else ""
        return ConfigError(
            f"data directory {self.folder} is not writable{detail}; make it writable, or "
            "choose another with --data-dir or OPENCRAB_HOME"
        )

    def current_revision(self) -> str | None:
        """The migration revision the database is at, or None for a blank database."""
        from opencrab.store import migrate

        return migrate.current(self)

    def close(self) -> None:
        """Release every pooled connection."""
        if self._here is not None:
            self._here.close()
        _close_idle(self._idle)
        self.engine.dispose()


class WouldWait(Exception):
    """A write `Database.run` began on the caller's thread found the write lock taken."""


@dataclass(slots=True)
class _Attempt:
    """`Database.run` running its work on the caller's thread."""

    db: Database
    wrote: bool = False  # a write transaction committed: later ones may wait


_HERE: ContextVar[_Attempt | None] = ContextVar("opencrab-store-here", default=None)


class _Here:
    """The write transactions `Database.run` runs on its caller's thread: each thread's
    own connection, which never waits for the write lock (busy_timeout 0: WouldWait
    instead) nor checkpoints the WAL as it commits (a checkpoint syncs the disk); every
    CHECKPOINT_EVERY commits a passive checkpoint runs in a thread of its own."""

    def __init__(self, db: Database) -> None:
        # weakly: the Database holds this, and a cycle would keep both (and their open
        # connections) until the cyclic garbage collector comes by
        self._db = weakref.ref(db)
        self._local = threading.local()  # .conn, .pool, .pid: this thread's connection
        self.opened: list[Connection] = []  # every thread's, for close()
        self._lock = threading.Lock()
        self._commits = 0
        self._checkpointing = False

    @contextmanager
    def write(self, attempt: _Attempt) -> Iterator[Connection]:
        conn = self._connection()
        began = False
        try:
            with conn.begin():
                began = True
                yield conn
        except BaseException as exc:
            take_signals(conn)
            if not began and _busy(exc):
                raise WouldWait from None  # no transaction began: the connection is fine
            self._drop(conn)  # rolled back, or broken: the next write opens another
            raise
        attempt.wrote = True
        self.db._committed(conn)
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and not self._checkpointing:
            self._commits, self._checkpointing = 0, True
            threading.Thread(target=self._checkpoint, name="opencrab-wal", daemon=True).start()

    def _connection(self) -> Connection:
        local = self._local
        conn: Connection | None = getattr(local, "conn", None)
        if conn is not None and local.pool is self.db.engine.pool and local.pid == os.getpid():
            return conn
        if conn is not None and local.pid != os.getpid():  # a forked child: the parent's
            conn = local.conn = None
        if conn is not None:  # the engine was disposed: its pool is gone
            self._drop(conn)
        conn = self.db._connect()
        conn.execution_options(write=True)
        driver = conn.connection.dbapi_connection
        assert driver is not None
        driver.execute("PRAGMA busy_timeout = 0")
        driver.execute("PRAGMA wal_autocheckpoint = 0")
        local.conn, local.pool, local.pid = conn, self.db.engine.pool, os.getpid()
        with self._lock:
            self.opened.append(conn)
        return conn

    def _drop(self, conn: Connection) -> None:
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            if conn in self.opened:
                self.opened.remove(conn)
        conn.close()

    @property
    def db(self) -> Database:
        db = self._db()
        assert db is not None, "used after its Database was collected"
        return db

    def _checkpoint(self) -> None:
        """A passive WAL checkpoint (it waits for no reader or writer)."""
        db = self._db()
        try:
            if db is None:  # closed and gone meanwhile
                return
            raw = db.engine.raw_connection()
            try:
                raw.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]
            finally:
                raw.close()
        except Exception:  # the next one catches up; SQLite checkpoints on close too
            log.warning("WAL checkpoint of %s failed", db.url if db else "?", exc_info=True)
        finally:
            self._checkpointing = False

    def close(self) -> None:
        """Close every thread's connection (each is checked out of the pool)."""
        with self._lock:
            _close_all(self.opened)


def _close_all(conns: list[Connection]) -> None:
    """Close the connections and empty the list."""
    while conns:
        try:
            conns.pop().close()
        except Exception:
            log.debug("closing a connection failed", exc_info=True)


def _busy(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" (SQLITE_BUSY)."""
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode == sqlite3.SQLITE_BUSY


REUSE_SECS = 5.0
"""A connection idle longer than this between transactions goes back to the pool."""


class _Idle(NamedTuple):
    conn: Connection
    pool: Pool  # the engine's pool it came from (a disposed engine gets a new one)
    since: float  # when its last transaction ended (monotonic seconds)


def _close_idle(idle: dict[bool, deque[_Idle]]) -> None:
    """Hand every idle connection back to its pool."""
    for waiting in idle.values():
        while waiting:
            try:
                waiting.pop().conn.close()
            except IndexError:
                break


def _checked_url(url: str) -> sa.URL:
    """The URL parsed, with psycopg 3 for a PostgreSQL URL naming no driver; ConfigError
    for what is not a URL or names a database OpenCrab does not run on."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        raise ConfigError(f"database url {url!r} is not a database URL") from None
    backend = parsed.get_backend_name()
    if backend == "postgres":  # Heroku-style spelling
        parsed, backend = parsed.set(drivername="postgresql"), "postgresql"
    if backend not in DRIVERS:
        raise ConfigError(
            f"database url {parsed.render_as_string()!r}: OpenCrab runs on "
            f"{' or '.join(DRIVERS)}, not {backend}"
        )
    if "+" not in parsed.drivername:
        parsed = parsed.set(drivername=DRIVERS[backend])
    return parsed


def _writable(path: Path) -> bool:
    """True when the database file can be created or written, and so can its folder
    (SQLite keeps its -wal and -shm files next to it). Tried, not judged by mode bits:
    root writes through them, not through a read-only mount or `chattr +i`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
        if path.exists():
            os.close(os.open(path, os.O_RDWR))
    except OSError:
        return False
    return True


def _read_only_url(path: Path) -> sa.URL:
    """A read-only SQLite URL; `immutable` when no -shm file exists that a reader could
    share (nobody is writing then, and none can be created)."""
    shm = path.with_name(path.name + "-shm")
    query = "mode=ro" if shm.exists() else "mode=ro&immutable=1"
    return make_url(f"sqlite:///{path.resolve().as_uri()}?{query}&uri=true")
