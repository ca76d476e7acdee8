"""`opencrab token create|list|revoke`: bearer tokens for the server's API, with scopes.

A token's scope is what it may do: `read` (every GET, the dashboard's pages), `chat`
(+ talking to agents), `operate` (+ every other change: approvals, settings, imports,
agent mode, deletions) or `admin` (+ what changes security: tool settings); each
includes the ones before it. `create` makes `admin` tokens unless `--scope` says less.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    err_console,
    exits_on_error,
    print_json,
    store_from,
)
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when a command runs, not for `--help`
    from opencrab.auth import ApiToken


class ScopeChoice(StrEnum):  # opencrab.auth.Scope, without importing the store for --help
    read = "read"
    chat = "chat"
    operate = "operate"
    admin = "admin"


token_app = typer.Typer(help="Bearer tokens for the server's API.", no_args_is_help=True)


def _json(token: ApiToken) -> dict[str, object]:
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "scope": token.scope.value,
        "createdAt": token.created_at.isoformat(),
        "lastUsedAt": token.last_used_at.isoformat() if token.last_used_at else None,
        "revokedAt": token.revoked_at.isoformat() if token.revoked_at else None,
    }


@token_app.command()
@exits_on_error
def create(
    name: Annotated[str, typer.Argument(help="What the token is for, e.g. dashboard.")],
    scope: Annotated[
        ScopeChoice,
        typer.Option(
            help="What it may do: read, chat (+ talk to agents), operate (+ change "
            "anything: approvals, settings, imports, agent mode) or admin (+ tool settings)."
        ),
    ] = ScopeChoice.admin,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token; it is printed once and only its hash is kept.

    Example: opencrab token create grafana --scope read
    """
    from opencrab.auth import Scope, TokenStore

    with store_from(config, data_dir) as db:
        token, secret = TokenStore(db).create(name, Scope(scope.value))
    if as_json:
        print_json({**_json(token), "token": secret})
        return
    typer.echo(secret)
    err_console.print(
        f"token {token.name!r} ({token.scope}) created: copy it now, it is not shown again "
        "(send it as `Authorization: Bearer <token>`)",
        highlight=False,
        markup=False,
    )


@token_app.command("list")
@exits_on_error
def list_tokens(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked tokens.")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tokens by name and prefix (the secrets themselves are not stored)."""
    from opencrab.auth import TokenStore

    with store_from(config, data_dir) as db:
        tokens = TokenStore(db).list(include_revoked=all_)
    if as_json:
        print_json([_json(t) for t in tokens])
        return
    table = Table(title="API tokens")
    for column in ("name", "scope", "prefix", "id", "created", "last used", "revoked"):
        table.add_column(column)
    for t in tokens:
        table.add_row(
            escape(t.name),
            t.scope.value,
            t.prefix + "…",
            t.id,
            f"{t.created_at:%Y-%m-%d %H:%M}",
            f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never",
            f"{t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "",
        )
    console.print(table)


@token_app.command()
@exits_on_error
def revoke(
    token: Annotated[str, typer.Argument(help="The token's name, id or prefix.")],
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Revoke a token: requests carrying it, and the dashboard sign-ins made with it, are
    refused from now on."""
    from opencrab.auth import TokenStore

    with store_from(config, data_dir) as db:
        revoked = TokenStore(db).revoke(token)
    console.print(
        f"token {revoked.name!r} ({revoked.prefix}…) revoked", highlight=False, markup=False
    )


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(token_app, name="token")
