"""Alembic, driven from code: `opencrab db upgrade` and start-up both call `upgrade`."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection

from opencrab.errors import StoreError


class Migratable(Protocol):
    """What migrating asks of a database: store.database.Database is one (a protocol, so
    that this module, which Database loads when it migrates, does not import it back)."""

    @property
    def url(self) -> URL: ...

    def read(self) -> AbstractContextManager[Connection]: ...

    def write(self) -> AbstractContextManager[Connection]: ...


def alembic_config() -> Config:
    """An Alembic config pointing at the migrations packaged with opencrab."""
    config = Config()
    config.set_main_option("script_location", "opencrab.store:migrations")
    return config


def head() -> str:
    """The newest revision shipped with this version of opencrab."""
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None
    return revision


def upgrade(db: Migratable, revision: str = "head") -> None:
    """Migrate the database to `revision` in one transaction."""
    config = alembic_config()
    try:
        with db.write() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"migration to {revision} failed: {exc}") from exc


def downgrade(db: Migratable, revision: str) -> None:
    """Migrate the database down to `revision` ("base" removes every table)."""
    config = alembic_config()
    try:
        with db.write() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
    except Exception as exc:
        raise StoreError(f"migration down to {revision} failed: {exc}") from exc


def current(db: Migratable) -> str | None:
    """The revision the database is at; None when it was never migrated. StoreError
    when the database cannot be read (a file that is no SQLite database, …)."""
    try:
        with db.read() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except sa.exc.DatabaseError as exc:
        where = db.url.render_as_string(hide_password=True)
        raise StoreError(f"cannot read the database {where}: {exc.orig}") from None
