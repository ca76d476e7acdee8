"""`opencrab agent-mode …`: plan a request into a task DAG, run it, watch and control it.

`plan REPO "request"` asks the master agent (`[agent_mode] master_agent`, or `--agent`)
for a plan and stores the session (Active, every task Pending; it is not started).
`start REPO "request" --cli claude` plans, shows the plan, asks (unless `--yes`; without a
terminal `--yes` is required) and runs
it in this process until it ends (Ctrl-C stops watching; the sub-agents go on in their
tmux panes and `resume` watches them again). `status` lists the sessions; `status
SESSION` shows one with its tasks, sub-agents and waiting questions. `answer TASK
"text"`, `attach TASK`, `pause`, `resume`, `cancel`, `retry TASK`, `cleanup` act on the
session given with `--session` (default: the most recently updated one).
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
    from opencrab.agentmode.runner import AgentModeRunner
    from opencrab.agentmode.runstate import RunState
    from opencrab.config import Settings
    from opencrab.store import Database
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


def _show(session: AgentSession, run: RunState | None = None) -> None:
    console.print(
        f"session {session.id} · {session.status.value} · {escape(str(session.repository_path))}",
        highlight=False,
    )
    table = Table("task", "status", "strategy", "depends on", "name", "sub-agent")
    for task in session.tasks:
        agent = task.sub_agent
        table.add_row(
            escape(task.id),
            task.status.value,
            task.worktree_strategy.value,
            escape(", ".join(task.dependencies) or "—"),
            escape(task.name),
            "—" if agent is None else f"{agent.agent_type.value} {agent.status.value}",
        )
    console.print(table)
    if run is None:
        return
    for task_id, question in run.questions.items():
        console.print(f"[yellow]{escape(task_id)} asks:[/] {escape(question)}", highlight=False)
    for task_id, outcome in run.outcomes.items():
        stat = outcome.diff_stat.strip().splitlines()[-1:] or ["no changes"]
        line = f"{escape(task_id)}: {escape(outcome.delivery)} · {escape(stat[0].strip())}"
        console.print(line, highlight=False)


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

    Example: opencrab agent-mode plan . "Add sign-in with email and password"
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
            from opencrab.agentmode.runstate import RunFiles

            found = service.get(session)
            run = RunFiles(settings.data_dir / "agent-mode").load(found.id)
            if as_json:
                data = _session_data(found)
                data["run"] = None if run is None else run.as_json()
                print_json(data)
            else:
                _show(found, run)
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


SessionOption = Annotated[
    str | None,
    typer.Option("--session", "-s", help="The session (default: the most recently updated)."),
]
CliOption = Annotated[
    str, typer.Option("--cli", help="The coding CLI: claude, codex, gemini, opencode, other.")
]
CommandOption = Annotated[
    str | None,
    typer.Option("--command", help="The program to run (`other`), or the CLI's executable."),
]


def _pick(db: Database, settings: Settings, session: str | None, task: str | None = None) -> str:
    """The session id: the one given, else the latest (holding `task`, when given)."""
    from opencrab.agentmode.service import AgentModeService
    from opencrab.errors import NotFoundError

    if session:
        return session
    service = AgentModeService.open(settings, db)
    for row in service.list(limit=1000):
        if task is None or service.get(row.id).task(task) is not None:
            return row.id
    raise NotFoundError("no agent-mode session" + (f" has a task {task}" if task else ""))


def _with_runner(
    config: Path | None,
    data_dir: Path | None,
    session: str | None,
    task: str | None,
    body: Any,
    *,
    watch: bool = False,
) -> Any:
    """Run `body(runner, session_id)` in an event loop; with `watch`, then follow the
    session until it ends (Ctrl-C stops watching, the sub-agents go on). The runner
    watches a session only under its lease, as a server or worker does: one that
    another process watches is left to it."""
    import asyncio

    from opencrab.agentmode.opening import open_runner
    from opencrab.store.lease_keeper import LeaseKeeper
    from opencrab.store.leases import LeaseStore

    settings = settings_from(config, data_dir)

    async def main() -> Any:
        with store_from(config, data_dir) as db:
            session_id = _pick(db, settings, session, task)
            leases = LeaseKeeper(LeaseStore(db), ttl_secs=settings.database.lease_ttl_secs)
            leases.start()
            runner = open_runner(settings, db, leases=leases)
            try:
                result = await body(runner, session_id)
                if watch:
                    runner.listeners.append(_progress(runner))
                    return await runner.wait(session_id)
                return result
            finally:
                await runner.close()
                await leases.close()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        err_console.print("stopped watching; the sub-agents go on (`agent-mode resume`)")
        raise typer.Exit(130) from None


def _progress(runner: AgentModeRunner) -> Any:
    def changed(session_id: str, task_id: str | None) -> None:
        if task_id is None:
            return
        session = runner.service.get(session_id)
        task = session.task(task_id)
        if task is None:
            return
        agent = "" if task.sub_agent is None else f" ({task.sub_agent.status.value})"
        console.print(f"{escape(task_id)} {task.status.value}{agent}", highlight=False)

    return changed


@agent_mode_app.command()
@exits_on_error
def start(
    repository: Annotated[Path, typer.Argument(help="A git work tree.", show_default=False)],
    request: Annotated[str, typer.Argument(help="What to do.", show_default=False)],
    cli: CliOption = "claude",
    command: CommandOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without asking.")] = False,
    ask: Annotated[
        bool,
        typer.Option(
            "--ask",
            help="Run the CLI without its full-auto flags: it asks before acting "
            "(answer with `agent-mode answer TASK 1`).",
        ),
    ] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", help="The planning agent (name or id).")
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Plan REQUEST, show the plan, start it with the coding CLI and watch it to its end.

    Example: opencrab agent-mode start . "Add sign-in with email and password" --cli claude
    """
    import asyncio
    import sys

    from opencrab.agentmode.clis import launch_command, profile_for
    from opencrab.agentmode.credentials import SubAgentCredentials
    from opencrab.agentmode.runner import CLIS_BIN
    from opencrab.agentmode.service import AgentModeService
    from opencrab.core.runtime import Runtime
    from opencrab.errors import ValidationError

    # an unknown CLI, `other` without --command, a CLI not installed: refused before planning
    launch_command(profile_for(cli), command, (CLIS_BIN,))
    if not yes and not sys.stdin.isatty():  # nobody to answer "Start these tasks?"
        raise ValidationError(
            "there is no terminal to confirm the plan: run again with --yes to start "
            "without asking (or `agent-mode plan`, then `agent-mode resume -s ID`)"
        )
    settings = settings_from(config, data_dir)

    async def plan_it() -> AgentSession:
        async with Runtime.open(settings) as runtime:
            # a CLI whose provider has no key: refused before planning spends anything
            SubAgentCredentials(runtime.llm_settings).endpoint(profile_for(cli).agent_type)
            service = AgentModeService.open(settings, runtime.db)
            return await service.create_session(
                runtime.router, runtime.agents, repository, request, agent=agent
            )

    session = asyncio.run(plan_it())
    _show(session)
    if not yes and not typer.confirm("Start these tasks?", default=True):
        console.print(f"not started; start later with: agent-mode resume -s {session.id}")
        return

    async def go(runner: AgentModeRunner, session_id: str) -> None:
        await runner.start(session_id, cli, command, full_auto=not ask)

    _show(_with_runner(config, data_dir, session.id, None, go, watch=True))


@agent_mode_app.command()
@exits_on_error
def answer(
    task: Annotated[str, typer.Argument(help="The task asking (task-001).")],
    text: Annotated[str, typer.Argument(help="The answer typed into its pane.")],
    session: SessionOption = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Answer a waiting sub-agent's question (typed into its pane)."""

    async def go(runner: AgentModeRunner, session_id: str) -> None:
        await runner.answer(session_id, task, text)

    _with_runner(config, data_dir, session, task, go)
    console.print(f"answered {escape(task)}", highlight=False)


@agent_mode_app.command()
@exits_on_error
def attach(
    task: Annotated[str, typer.Argument(help="The task whose pane to attach to.")],
    session: SessionOption = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Attach this terminal to the task's tmux pane (detach with the tmux prefix, then d)."""
    import os
    import shutil

    from opencrab.agentmode.instance import tmux_socket
    from opencrab.agentmode.service import AgentModeService
    from opencrab.errors import ConflictError, ValidationError

    settings = settings_from(config, data_dir)
    with store_from(config, data_dir) as db:
        session_id = _pick(db, settings, session, task)
        found = AgentModeService.open(settings, db).get(session_id).task(task)
    if found is None or found.sub_agent is None:
        raise ConflictError(f"{task} has no sub-agent pane (not started)")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise ValidationError("tmux is not installed")
    socket = tmux_socket(settings)
    pane = found.sub_agent.pane_id
    argv = [tmux, "-L", socket, "select-window", "-t", pane, ";", "attach", "-t", pane]
    os.execv(tmux, argv)  # noqa: S606 - replaces this process with tmux, no shell


def _control(name: str, help_text: str) -> None:
    def command(
        session: SessionOption = None,
        config: ConfigOption = None,
        data_dir: DataDirOption = None,
    ) -> None:
        async def go(runner: AgentModeRunner, session_id: str) -> AgentSession:
            result: AgentSession = await getattr(runner, name)(session_id)
            return result

        done = _with_runner(config, data_dir, session, None, go, watch=name == "resume")
        _show(done)

    command.__doc__ = help_text
    agent_mode_app.command(name)(exits_on_error(command))


_control("pause", "Start no more tasks (running sub-agents go on).")
_control("resume", "Paused -> Active; re-attach to live panes and watch the session to its end.")
_control("cancel", "End every sub-agent's processes; unfinished tasks become Cancelled.")


@agent_mode_app.command()
@exits_on_error
def retry(
    task: Annotated[str, typer.Argument(help="The failed task.")],
    session: SessionOption = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Put a failed task back to Pending and watch the session go on."""

    async def go(runner: AgentModeRunner, session_id: str) -> None:
        await runner.retry(session_id, task)

    _show(_with_runner(config, data_dir, session, task, go, watch=True))


@agent_mode_app.command()
@exits_on_error
def cleanup(
    session: SessionOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Remove unmerged, unpushed work too.")
    ] = False,
    orphans: Annotated[
        bool, typer.Option("--orphans", help="Also remove the orphaned panes and worktrees.")
    ] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove finished tasks' worktrees and branches; report orphans and disk use."""
    from opencrab.agentmode.cleanup import CleanupReport

    async def go(runner: AgentModeRunner, session_id: str) -> CleanupReport:
        return await runner.cleanup(session_id, force=force, orphans=orphans)

    report: CleanupReport = _with_runner(config, data_dir, session, None, go)
    if as_json:
        print_json(report.as_json())
        return
    for branch in report.removed:
        console.print(f"removed {escape(branch)}", highlight=False)
    for branch, why in report.refused.items():
        console.print(f"[yellow]kept {escape(branch)}:[/] {escape(why)}", highlight=False)
    verb = "removed" if report.orphans_removed else "found (remove with --orphans)"
    for item in [*report.orphan_panes, *report.orphan_worktrees]:
        console.print(f"orphan {verb}: {escape(item)}", highlight=False)
    total = sum(report.disk_bytes.values())
    console.print(f"worktrees use {total / 1e6:.1f} MB", highlight=False)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(agent_mode_app, name="agent-mode")
