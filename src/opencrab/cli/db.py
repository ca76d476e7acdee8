"""`opencrab db upgrade|current`: database migrations."""

from __future__ import annotations

import typer

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    console,
    exits_on_error,
    open_store,
    settings_from,
)
from opencrab.plugins import hookimpl
from opencrab.store import migrate

db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)


@db_app.command()
@exits_on_error
def upgrade(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Migrate the database to the newest schema."""
    settings = settings_from(config, data_dir)
    db = open_store(settings, migrate=False)
    try:
        before = db.current_revision()
        db.upgrade()
        after = db.current_revision()
    finally:
        db.close()
    if before == after:
        console.print(f"database already at {after} (head)")
    else:
        console.print(f"database upgraded {before or 'blank'} → {after}")


@db_app.command()
@exits_on_error
def current(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Print the database's migration revision ("none" for a blank database)."""
    settings = settings_from(config, data_dir)
    db = open_store(settings, migrate=False)
    try:
        revision = db.current_revision()
    finally:
        db.close()
    head = migrate.head()
    suffix = " (head)" if revision == head else f" (head is {head})"
    typer.echo(f"{revision or 'none'}{suffix}")


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
