"""Fast, portable bulk inserts: compile the INSERT once, hand rows to `executemany`.

SQLAlchemy's generic executemany processes every parameter of every row in Python;
for large batches (event imports, transcript imports) this compiles the statement for
the connection's dialect and sends plain tuples (or dicts, for named paramstyles) to
the driver. Values of columns whose type needs bind processing (UtcDateTime) are
converted once per value.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from opencrab.store import dialects
from opencrab.store.dialects import postgresql as postgresql_dialect
from opencrab.store.prepared import driver_execute


def bulk_insert(
    conn: Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    recoverable: bool = False,
    bound: bool = False,
) -> None:
    """Insert `rows` (tuples in `columns` order) into `table` with one executemany.

    `bound`: the rows hold what the driver takes (the caller did the columns' bind
    processing: a UtcDateTime as `format_timestamp` text on SQLite, an aware datetime
    on PostgreSQL), so no value is converted here.

    `recoverable`: a failing insert (IntegrityError, …) leaves `conn`'s transaction
    usable. SQLite undoes only the failed statement by itself; PostgreSQL aborts the
    transaction, so there the insert runs in a savepoint sent in the same round trip
    (dialects.postgresql.pipelined_savepoint).
    """
    if not rows:
        return
    dialect = conn.dialect
    key = (id(dialect), table.name, tuple(columns))
    cached = _COMPILED.get(key)
    if cached is None:
        stmt = table.insert().values({name: sa.bindparam(name) for name in columns})
        compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
        processors: tuple[tuple[int, Callable[[Any], Any]], ...] = tuple(
            (i, process)
            for i, name in enumerate(columns)
            if (process := table.c[name].type._cached_bind_processor(dialect)) is not None
        )
        sql = str(compiled)
        position = tuple(compiled.positiontup or ())
        reordered = position != tuple(columns) and sorted(position) == sorted(columns)
        if compiled.positional and reordered and dialect.paramstyle == "qmark":
            # the VALUES in the caller's column order, so rows go to the driver as given
            # (SQLAlchemy lists the table's order, which would mean rebuilding every row)
            quote = dialect.identifier_preparer
            names = ", ".join(quote.format_column(table.c[name]) for name in columns)
            marks = ", ".join("?" * len(columns))
            sql = f"INSERT INTO {quote.format_table(table)} ({names}) VALUES ({marks})"
            position = tuple(columns)
        cached = _COMPILED[key] = (sql, bool(compiled.positional), position, processors)
    sql, positional, positiontup, processors = cached
    if processors and not bound:
        converted = []
        for row in rows:
            values = list(row)
            for i, convert in processors:
                if values[i] is not None:
                    values[i] = convert(values[i])
            converted.append(values)
        rows = converted
    many = True
    if positional:
        order = [columns.index(name) for name in positiontup]
        if order != list(range(len(columns))):
            rows = [tuple(row[i] for i in order) for row in rows]
        params: Any = rows
    elif len(rows) <= SMALL_BATCH and dialect.name == "postgresql":
        # one statement with a VALUES row each: one round trip, where psycopg's
        # executemany enters and leaves pipeline mode (a step writes a few rows)
        sql = _multi_row_sql(dialect, table, columns, len(rows))
        params = {
            f"{name}_{i}": value
            for i, row in enumerate(rows)
            for name, value in zip(columns, row, strict=True)
        }
        many = False
    else:
        params = [dict(zip(columns, row, strict=True)) for row in rows]
    if not recoverable or dialect.name == "sqlite":
        driver_execute(conn, sql, params, many=many)
    elif conn.in_transaction():
        with postgresql_dialect.pipelined_savepoint(conn):
            driver_execute(conn, sql, params, many=many)
    else:
        with dialects.recoverable(conn):
            driver_execute(conn, sql, params, many=many)


SMALL_BATCH = 16
"""Up to this many rows go to PostgreSQL as one multi-row INSERT."""


def _multi_row_sql(dialect: Dialect, table: sa.Table, columns: Sequence[str], count: int) -> str:
    """`INSERT … VALUES (…), (…)` of `count` rows, parameters named `{column}_{row}`."""
    key = (id(dialect), table.name, tuple(columns), count)
    sql = _MULTI_ROW.get(key)
    if sql is None:
        values: list[dict[str, Any]] = [
            {name: sa.bindparam(f"{name}_{i}") for name in columns} for i in range(count)
        ]
        sql = _MULTI_ROW[key] = str(table.insert().values(values).compile(dialect=dialect))
    return sql


_MULTI_ROW: dict[tuple[int, str, tuple[str, ...], int], str] = {}


_COMPILED: dict[
    tuple[int, str, tuple[str, ...]],
    tuple[str, bool, tuple[str, ...], tuple[tuple[int, Callable[[Any], Any]], ...]],
] = {}
"""Compiled INSERTs by (dialect object, table, columns), with the columns' bind
processors: compiling costs more than a row."""


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many long-lived objects.

    Creating 100k objects that all stay alive makes CPython rescan them over and over;
    the collector is switched back on at exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
