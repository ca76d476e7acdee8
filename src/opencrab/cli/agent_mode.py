"""`opencrab agent-mode plan|status`: plan a request into a task DAG, show sessions.

`plan REPO "request"` asks the master agent (`[agent_mode] master_agent`, or `--agent`)
for a plan and stores the session (Active, every task Pending; it is not started).
`status` lists the sessions; `status SESSION` shows one with its tasks. `--json` prints
the session in the seed's file format (or the list's rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    settings_from,
    store_from,
)
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when a command runs, not for `--help`
    from opencrab.agentmode.model import AgentSession
    from opencrab.store.repositories.agent_mode import AgentModeSessionRow

agent_mode_app = typer.Typer(
    help="Agent mode: a request becomes a task plan (a DAG) for coding CLIs.",
    no_args_is_help=True,
)


def _session_data(session: AgentSession) -> Any:
    import json

    from opencrab.agentmode.model import dump_session

    return json.loads(dump_session(session))


def _row_data(row: AgentModeSessionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "repository_path": row.repository_path,
        "status": row.status,
        "title": row.title,
        "tasks_total": row.tasks_total,
        "task_counts": row.task_counts,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }


def _show(session: AgentSession) -> None:
    console.print(
        f"session {session.id} · {session.status.value} · {escape(str(session.repository_path))}",
        highlight=False,
    )
    table = Table("task", "status", "strategy", "depends on", "name")
    for task in session.tasks:
        table.add_row(
            task.id,
            task.status.value,
            task.worktree_strategy.value,
            ", ".join(task.dependencies) or "—",
            escape(task.name),
        )
    console.print(table)


@agent_mode_app.command()
@exits_on_error
def plan(
    repository: Annotated[Path, typer.Argument(help="A git work tree.", show_default=False)],
    request: Annotated[str, typer.Argument(help="What to do.", show_default=False)],
    agent: Annotated[
        str | None, typer.Option("--agent", help="The planning agent (name or id).")
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Plan REQUEST for REPOSITORY with the master agent; the session is stored, not started.

    Example: opencrab agent-mode plan . "認証機能を実装して"
    """
    import asyncio

    from opencrab.agentmode.service import AgentModeService
    from opencrab.core.runtime import Runtime

    settings = settings_from(config, data_dir)

    async def main() -> AgentSession:
        async with Runtime.open(settings) as runtime:
            for notice in runtime.notices:
                err_console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False)
            service = AgentModeService.open(settings, runtime.db)
            return await service.create_session(
                runtime.router, runtime.agents, repository, request, agent=agent
            )

    session = asyncio.run(main())
    if as_json:
        print_json(_session_data(session))
        return
    _show(session)


@agent_mode_app.command()
@exits_on_error
def status(
    session: Annotated[
        str | None, typer.Argument(help="A session id (all sessions when left out).")
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """List agent-mode sessions, or show one with its tasks."""
    from opencrab.agentmode.service import AgentModeService

    settings = settings_from(config, data_dir)
    with store_from(config, data_dir) as db:
        service = AgentModeService.open(settings, db)
        if session is not None:
            found = service.get(session)
            if as_json:
                print_json(_session_data(found))
            else:
                _show(found)
            return
        rows = service.list(limit=1000)
    if as_json:
        print_json([_row_data(r) for r in rows])
        return
    table = Table("session", "status", "tasks", "repository", "request")
    table.columns[0].no_wrap = True  # the id is what `status SESSION` needs: never cut
    table.columns[0].min_width = 36
    for row in rows:
        done = row.task_counts.get("completed", 0)
        table.add_row(
            row.id,
            row.status,
            f"{done}/{row.tasks_total}",
            escape(row.repository_path),
            escape(row.title),
        )
    console.print(table)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(agent_mode_app, name="agent-mode")
