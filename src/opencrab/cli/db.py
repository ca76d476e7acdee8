"""`opencrab db upgrade|current`: database migrations."""

from __future__ import annotations

import typer

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    console,
    exits_on_error,
    store_from,
)
from opencrab.plugins import hookimpl

db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)


@db_app.command()
@exits_on_error
def upgrade(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Migrate the database to the newest schema (`opencrab up` does it too).

    Example: opencrab db upgrade --data-dir ./data
    """
    from opencrab.store.repositories.memory_vectors import use_pgvector_if_installed

    with store_from(config, data_dir, migrate=False) as db:
        before = db.current_revision()
        db.upgrade()
        after = db.current_revision()
        why_not = use_pgvector_if_installed(db) if db.dialect == "postgresql" else None
    if before == after:
        console.print(f"database already at {after} (head)")
    else:
        console.print(f"database upgraded {before or 'blank'} → {after}")
    if why_not is not None:
        console.print(f"memory vectors are searched in process (numpy): {why_not}")


@db_app.command()
@exits_on_error
def current(config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """Print the database's migration revision ("none" for a blank database)."""
    with store_from(config, data_dir, migrate=False) as db:
        revision = db.current_revision()
    from opencrab.store import migrate  # Alembic loads only when it is needed

    head = migrate.head()
    suffix = " (head)" if revision == head else f" (head is {head})"
    typer.echo(f"{revision or 'none'}{suffix}")


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
