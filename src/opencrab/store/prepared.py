"""Prepared statements: a Core statement compiled once per dialect, run through the driver.

Executing a Core statement builds its cache key, coerces its parameters and sets up a
result object on every call (~50-100 µs); the statements an agent turn runs a dozen
times each cost more in that bookkeeping than in the database. A `Prepared` statement is
compiled once per dialect; each run hands a plain tuple (or dict, for named
paramstyles) to a DBAPI cursor of the connection's current transaction (SQLite and
PostgreSQL alike, `driver_execute`) and converts result values with the column types'
own processors (timestamps, JSON), so rows come back exactly as SQLAlchemy would return
them.

Example:
    LAST = Prepared(
        sa.select(events.c.id)
        .where(events.c.trace_id == sa.bindparam("trace_id"))
        .order_by(events.c.seq.desc())
        .limit(1)
    )
    with db.read() as conn:
        last = LAST.scalar(conn, trace_id=trace)
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import UpdateBase

from opencrab.store.dialects.postgresql import pipelined, queued_reads, settle


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positional: bool
    names: tuple[str, ...]  # bind names, in the order a positional driver takes them
    defaults: dict[str, Any]  # values of the statement's own literals (`col == 1`)
    bind: tuple[tuple[str, Callable[[Any], Any]], ...]  # bind processors by name
    row: type | None  # a named tuple of the selected columns, None for DML
    results: tuple[Callable[[Any], Any] | None, ...]


class Prepared:
    """One statement with `sa.bindparam` placeholders; see the module docstring.

    `statement` may also be a function of the dialect giving its statement (SQL only one
    dialect spells, such as an upsert: store/dialects.upsert). An INSERT/UPDATE with
    RETURNING gives its rows like a SELECT.
    """

    def __init__(self, statement: Executable | Callable[[Dialect], Executable]) -> None:
        self.statement = statement
        self._compiled: dict[int, _Compiled] = {}

    # ------------------------------------------------------------------ running
    def rows(self, conn: Connection, **params: Any) -> list[Any]:
        """Every result row, as named tuples (attribute access by column name); the
        result of a matching `queue` of this transaction when there is one."""
        compiled = self._for(conn.dialect)
        queued = queued_reads(conn)
        if queued:
            key = _key(compiled, self._args(compiled, params))
            cursor = queued.pop(key, None) if key is not None else None
            if cursor is not None:
                return self._read(conn, compiled, cursor, params)
        cursor = self._execute(conn, compiled, params)
        return self._read(conn, compiled, cursor, params)

    def queue(self, conn: Connection, **params: Any) -> None:
        """Send this read ahead, in a pipelined transaction (PostgreSQL): it goes with the
        transaction's next round trip, and the first `rows`/`first`/`scalar` of this
        statement with the same parameters in the transaction takes its result instead
        of asking again, so reads queued together cost one round trip between them.
        Elsewhere (SQLite, no round trips to save) it does nothing."""
        queued = queued_reads(conn)
        if queued is None:
            return
        compiled = self._for(conn.dialect)
        args = self._args(compiled, params)
        key = _key(compiled, args)
        if key is not None and key not in queued:
            queued[key] = driver_execute(conn, compiled.sql, args)

    def rows_later(self, conn: Connection, **params: Any) -> Callable[[], list[Any]]:
        """`rows`, read when the returned function is called. In a pipelined transaction
        (PostgreSQL) call it after the commit: the rows arrive with it, saving a round
        trip; elsewhere they are read at once."""
        compiled = self._for(conn.dialect)
        cursor = self._execute(conn, compiled, params)
        if not pipelined(conn):
            found = self._read(conn, compiled, cursor, params)
            return lambda: found
        return lambda: self._read(conn, compiled, cursor, params)

    def _read(
        self, conn: Connection, compiled: _Compiled, cursor: Any, params: dict[str, Any]
    ) -> list[Any]:
        try:
            fetched = cursor.fetchall()  # in a pipelined transaction: sends the queue
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _wrapped(conn, compiled.sql, params, exc) from exc
        assert compiled.row is not None, "rows() needs a SELECT or RETURNING"
        make = compiled.row._make  # type: ignore[attr-defined]
        results = compiled.results
        if not any(results):
            return [make(row) for row in fetched]
        return [
            make(
                [
                    value if fn is None or value is None else fn(value)
                    for fn, value in zip(results, row, strict=True)
                ]
            )
            for row in fetched
        ]

    def first(self, conn: Connection, **params: Any) -> Any | None:
        """The first row, or None."""
        found = self.rows(conn, **params)
        return found[0] if found else None

    def scalar(self, conn: Connection, **params: Any) -> Any:
        """The first column of the first row, or None."""
        row = self.first(conn, **params)
        return None if row is None else row[0]

    def execute(self, conn: Connection, **params: Any) -> int:
        """Run an INSERT/UPDATE/DELETE; returns the number of rows it matched."""
        compiled = self._for(conn.dialect)
        cursor = self._execute(conn, compiled, params)
        try:
            settle(conn)  # a pipelined transaction's rowcount comes with the results
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _wrapped(conn, compiled.sql, params, exc) from exc
        return int(cursor.rowcount)

    def run(self, conn: Connection, **params: Any) -> None:
        """Run an INSERT/UPDATE/DELETE whose rowcount nobody reads: in a pipelined
        transaction it stays queued until a later statement's result or the commit."""
        self._execute(conn, self._for(conn.dialect), params)

    # ------------------------------------------------------------------ internals
    def _execute(self, conn: Connection, compiled: _Compiled, params: dict[str, Any]) -> Any:
        return driver_execute(conn, compiled.sql, self._args(compiled, params))

    def _args(self, compiled: _Compiled, params: dict[str, Any]) -> Sequence[Any] | dict[str, Any]:
        """The driver's parameters: bind-processed values in the statement's order."""
        values = {**compiled.defaults, **params} if compiled.defaults else params
        for name, process in compiled.bind:
            value = values.get(name)
            if value is not None:
                values[name] = process(value)
        args: Sequence[Any] | dict[str, Any]
        try:
            if compiled.positional:
                args = tuple(values[n] for n in compiled.names)
            else:
                args = {n: values[n] for n in compiled.names}
        except KeyError as exc:
            raise TypeError(f"missing parameter {exc.args[0]!r} for {compiled.sql}") from None
        return args

    def _for(self, dialect: Dialect) -> _Compiled:
        found = self._compiled.get(id(dialect))
        if found is None:
            statement = self.statement
            if not isinstance(statement, Executable):
                statement = statement(dialect)
            found = self._compiled[id(dialect)] = _compile(statement, dialect)
        return found


def driver_execute(conn: Connection, sql: str, args: Any, *, many: bool = False) -> Any:
    """Run SQL compiled for `conn`'s dialect straight on its driver; returns the cursor.

    Inside the transaction SQLAlchemy began on `conn` (SQLite's BEGIN, psycopg's implicit
    one) the statement goes to the DBAPI connection itself: SQLAlchemy's per-statement
    bookkeeping costs more than most of a turn's statements. Driver errors become the
    same SQLAlchemy exceptions (IntegrityError, …) `exec_driver_sql` raises; outside a
    transaction it is `exec_driver_sql`. `many`: `args` is a list of rows (executemany).
    Listeners of SQLAlchemy's `before_cursor_execute` see the statement (no context).
    """
    if not conn.in_transaction():
        return conn.exec_driver_sql(sql, args)
    dialect = conn.dialect
    raw = conn.connection.dbapi_connection
    assert raw is not None
    try:
        cursor = raw.cursor()
        if conn._has_events or conn.engine._has_events:  # e.g. a test counting statements
            conn.dispatch.before_cursor_execute(conn, cursor, sql, args, None, many)
        if many:
            cursor.executemany(sql, args)
        else:
            cursor.execute(sql, args)
    except dialect.loaded_dbapi.Error as exc:
        raise _wrapped(conn, sql, args, exc) from exc
    return cursor


def _key(compiled: _Compiled, args: Sequence[Any] | dict[str, Any]) -> Any:
    """What identifies a queued read: its SQL and driver parameters (None: unhashable)."""
    values = tuple(args.items()) if isinstance(args, dict) else tuple(args)
    try:
        hash(values)
    except TypeError:
        return None
    return (compiled.sql, values)


def _wrapped(conn: Connection, sql: str, args: Any, exc: Exception) -> Exception:
    """A driver error as the SQLAlchemy exception `exec_driver_sql` would raise."""
    error = conn.dialect.loaded_dbapi.Error
    return sa.exc.DBAPIError.instance(sql, args, exc, error, dialect=conn.dialect)


def _row_class(names: tuple[str, ...]) -> type:
    return namedtuple("Row", names, rename=True)


def _compile(statement: Executable, dialect: Dialect) -> _Compiled:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    binds = compiled.binds
    if compiled.positional:
        names = tuple(compiled.positiontup or ())
    else:  # the rendered names (`binds` also holds anonymous keys)
        names = tuple(dict.fromkeys(compiled.bind_names.values()))
    defaults = {
        name: value
        for name, value in compiled.construct_params(_check=False).items()
        if not binds[name].required and value is not None
    }
    bind = tuple(
        (name, process)
        for name in binds
        if (process := binds[name].type._cached_bind_processor(dialect)) is not None
    )
    row: type | None = None
    results: tuple[Callable[[Any], Any] | None, ...] = ()
    columns: list[Any] = []
    if isinstance(statement, sa.Select):
        columns = list(statement.selected_columns)
    elif isinstance(statement, UpdateBase):  # RETURNING …, if any
        columns = list(statement.exported_columns)
    if columns:
        row = _row_class(tuple(str(c.key) for c in columns))
        results = tuple(c.type._cached_result_processor(dialect, None) for c in columns)
    return _Compiled(
        sql=str(compiled),
        positional=bool(compiled.positional),
        names=names,
        defaults=defaults,
        bind=bind,
        row=row,
        results=results,
    )
