"""Agents from the command line: create and inspect them, chat, search memory, discuss.

opencrab agent create --name N [--prompt P] [--language en|ja|zh] [--persona FILE] [--json]
opencrab agent list|show AGENT|delete AGENT
opencrab chat AGENT                      interactive, streaming; Ctrl-C stops a reply,
                                         /quit or a second Ctrl-C leaves
opencrab chat AGENT -m TEXT [--json]     one turn
opencrab memory search AGENT QUERY [--json]
opencrab memory index AGENT [--now] [--json]   embedded N of M lines with <model>
opencrab memory eval AGENT [--questions N] [--generator auto|builtin|model] [--json]
opencrab skills list AGENT [--json]
opencrab workspace ls AGENT [PATH]
opencrab heartbeat tick AGENT [--json]
opencrab discuss --theme T --agents A,B[,C] [--max-turns N]
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
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
    open_store,
    print_json,
    settings_from,
    with_runtime,
)
from opencrab.cli.memory_eval import memory_eval
from opencrab.errors import ConfigError, ValidationError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # the core loads when a command runs, not for `--help`
    from opencrab.config import Settings
    from opencrab.core.agent import Agent, AgentCreate, AgentStore
    from opencrab.core.discussion import TurnOutcome
    from opencrab.core.runtime import Runtime
    from opencrab.core.skills import SkillManager
    from opencrab.core.steps import ActionDone, TurnResult
    from opencrab.gateway.cli import CliGateway
    from opencrab.messages import IncomingMessage
    from opencrab.store import Database

agent_app = typer.Typer(help="Create, list, show and delete agents.", no_args_is_help=True)
memory_app = typer.Typer(
    help="Search an agent's memory; see how far it is embedded; measure how well it finds things.",
    no_args_is_help=True,
)
skills_app = typer.Typer(help="List an agent's skills.", no_args_is_help=True)
workspace_app = typer.Typer(help="Browse an agent's workspace.", no_args_is_help=True)
heartbeat_app = typer.Typer(help="Run an agent's heartbeat by hand.", no_args_is_help=True)

AgentArg = Annotated[str, typer.Argument(help="The agent's name or id.", show_default=False)]


@contextmanager
def _agents(config: Path | None, data_dir: Path | None) -> Iterator[AgentStore]:
    """The agent store over the configured database (settings read once); closed on exit."""
    from opencrab.core.agent import AgentStore

    settings = settings_from(config, data_dir)
    db = open_store(settings)
    try:
        yield AgentStore(db, settings)
    finally:
        db.close()


def _check_agents(config: Path | None, data_dir: Path | None, names: list[str]) -> None:
    """NotFoundError for a wrong name, before any model is started."""
    with _agents(config, data_dir) as store:
        for name in names:
            store.get(name)


def _agent_json(agent: Agent, settings: Settings) -> dict[str, Any]:
    from opencrab.core.workspace import Workspace

    data = agent.model_dump(mode="json")
    data["workspace"] = str(Workspace.for_agent(settings, agent.id).root)
    return data


# ------------------------------------------------------------------ agent
@agent_app.command("create")
@exits_on_error
def create(
    name: Annotated[str | None, typer.Option("--name", "-n", help="Unique agent name.")] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", "-p", help="Agent prompt.")] = None,
    persona: Annotated[
        Path | None,
        typer.Option("--persona", help="Persona file (TOML, YAML or JSON).", show_default=False),
    ] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    role: Annotated[
        str | None, typer.Option("--role", help="discussant, facilitator, observer, custom:NAME")
    ] = None,
    language: Annotated[
        str | None,
        typer.Option(
            "--language",
            "-l",
            help="Language of its prompts and standard skills: en, ja or zh "
            "(default: \\[agent] language).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an agent (its soul, identity and LLM config from --persona or defaults).

    Example: opencrab agent create --name ada --prompt "You review Python code."
    """
    from opencrab.core.agent import AgentCreate, load_persona
    from opencrab.core.heartbeat import prime_warning
    from opencrab.core.identity import AgentRole, Identity
    from opencrab.core.workspace import Workspace
    from opencrab.prompts import check_language

    if persona is not None:
        spec = load_persona(persona, name=name)
    elif name is None:
        raise typer.BadParameter("give --name or --persona", param_hint="--name")
    else:
        spec = _spec(name)
    changes: dict[str, Any] = {}
    if prompt is not None:
        changes["prompt"] = prompt
    if description is not None:
        changes["description"] = description
    if language is not None:
        changes["language"] = check_language(language)
    if role is not None:
        who = spec.identity or Identity(name=spec.name)
        changes["identity"] = who.model_copy(update={"role": AgentRole.parse(role)})
    if changes:
        spec = AgentCreate.model_validate({**spec.model_dump(exclude_unset=True), **changes})
    with _agents(config, data_dir) as store:
        settings = store.settings
        agent = store.create(spec)
        Workspace.for_agent(settings, agent.id).root.mkdir(parents=True, exist_ok=True)
    warning = prime_warning(agent.heartbeat.interval_secs)
    if warning is not None:
        err_console.print(f"[yellow]note:[/] {escape(warning)}", highlight=False)
    if as_json:
        print_json(_agent_json(agent, settings))
        return
    console.print(
        f"created agent [bold]{escape(agent.name)}[/] ({agent.id}), "
        f"role {escape(str(agent.role))}, language {agent.language}",
        highlight=False,
    )


def _spec(name: str) -> AgentCreate:
    from opencrab.core.agent import AgentCreate

    try:
        return AgentCreate(name=name)
    except Exception as exc:  # pydantic's message names the field
        raise ValidationError(f"--name: {_first_error(exc)}") from None


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("msg", exc))
    return str(exc)


@agent_app.command("list")
@exits_on_error
def list_agents(
    config: ConfigOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False
) -> None:
    """Every agent."""
    with _agents(config, data_dir) as store:
        agents = store.list()
    if as_json:
        print_json([a.summary() for a in agents])
        return
    table = Table(title=f"{len(agents)} agents")
    for column in ("name", "id", "role", "heartbeat", "description"):
        table.add_column(column)
    for a in agents:
        beat = f"{a.heartbeat.interval_secs}s" + ("" if a.heartbeat.enabled else " (off)")
        table.add_row(escape(a.name), a.id, escape(str(a.role)), beat, escape(a.description or ""))
    console.print(table)


@agent_app.command("show")
@exits_on_error
def show(
    agent: AgentArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """An agent's persona, LLM config, heartbeat and today's spend."""
    from opencrab.core.workspace import Workspace

    with _agents(config, data_dir) as store:
        settings = store.settings
        found = store.get(agent)
        spent = store.spent_today(found.id)
    if as_json:
        data = _agent_json(found, settings)
        data["spentTodayUsd"] = spent
        print_json(data)
        return
    budget = found.llm_config.daily_budget_usd
    lines = [
        f"[bold]{escape(found.name)}[/] {found.id}",
        escape(found.description or ""),
        "",
        escape(found.identity.build_context(found.language)),
        "",
        escape(found.soul.build_context(found.language)),
        "",
        f"language: {found.language}",
        f"prompt: {escape(found.prompt) or '(none)'}",
        f"heartbeat: every {found.heartbeat.interval_secs}s"
        + ("" if found.heartbeat.enabled else " (off)"),
        f"spent today: ${spent:.4f}" + (f" of ${budget:.2f}" if budget is not None else ""),
        f"workspace: {escape(str(Workspace.for_agent(settings, found.id).root))}",
    ]
    console.print("\n".join(lines), highlight=False)


@agent_app.command("delete")
@exits_on_error
def delete(
    agent: AgentArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Delete an agent with its memory, skills and history (its workspace stays on disk)."""
    from opencrab.core.workspace import Workspace

    with _agents(config, data_dir) as store:
        settings = store.settings
        found = store.get(agent)
        if not yes and not typer.confirm(f"Delete agent {found.name} ({found.id})?"):
            raise typer.Exit(1)
        store.delete(found.id)
    console.print(
        f"deleted agent {escape(found.name)}; its workspace stays at "
        f"{escape(str(Workspace.for_agent(settings, found.id).root))}",
        highlight=False,
    )


# ------------------------------------------------------------------ chat
@exits_on_error
def chat(
    agent: AgentArg,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="Send one message ('-' reads stdin) and exit."),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Continue this session id.")
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="With -m: print the turn as JSON.")
    ] = False,
) -> None:
    """Talk to an agent: one turn with -m, otherwise an interactive session.

    Example: opencrab chat ada -m "What changed in the last commit?"
    """
    from opencrab.messages import message_problem

    if message == "-":
        message = sys.stdin.read()
    problem = None if message is None else message_problem(message)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--message")
    if message is None and as_json:
        raise typer.BadParameter("--json needs -m", param_hint="--json")
    if not settings_from(config, data_dir).gateway.cli.enabled:
        raise ConfigError(
            "the CLI gateway is off, so `opencrab chat` is refused; set it to true to chat "
            "here, or talk to the agent through the REST API, the WebSocket or /v1",
            key="gateway.cli.enabled",
        )
    _check_agents(config, data_dir, [agent])

    async def one_turn(runtime: Runtime) -> TurnResult:
        found = runtime.agents.get(agent)
        return await runtime.turns.chat(found, message or "", session_id=session)

    if message is not None:
        result = with_runtime(config, data_dir, one_turn)
        if as_json:
            from opencrab.core.steps import step_json

            print_json(step_json(result))  # the form the WebSocket's chat.done has
        else:
            _print_result(result)
        if result.error is not None:
            raise typer.Exit(1)
        return
    with_runtime(config, data_dir, lambda rt: _interactive(rt, agent, session))


def _print_result(result: TurnResult) -> None:
    for done in result.actions:
        _print_action(done)
    if result.reply is not None:
        console.print(escape(result.reply), highlight=False, soft_wrap=True)
    if result.error is not None:
        err_console.print(f"[bold red]error:[/] {escape(result.error.message)}", highlight=False)


def _print_action(done: ActionDone) -> None:
    mark = "[green]✓[/]" if done.result.success else "[red]✗[/]"
    detail = "" if done.result.success else f" {escape(done.result.error or '')}"
    err_console.print(f"[dim]· {escape(done.name)}[/] {mark}{detail}", highlight=False)


async def _interactive(runtime: Runtime, agent: str, session: str | None) -> None:
    """Chat until /quit, end of input or a second Ctrl-C; Ctrl-C stops the current turn."""
    from opencrab.core.sessions import ensure_chat_session
    from opencrab.gateway.cli import CliGateway
    from opencrab.gateway.registry import build_gateway

    found = runtime.agents.get(agent)
    session_id = ensure_chat_session(runtime.db, found.id, session)
    gateway = build_gateway("cli", runtime, session_id=session_id)  # the registered one
    if not isinstance(gateway, CliGateway):
        raise ConfigError(
            "the registered `cli` gateway is off or is not a terminal gateway",
            key="gateway.cli.enabled",
        )
    await gateway.connect()
    err_console.print(
        f"[dim]chatting with {escape(found.name)} (session {session_id}); "
        "Ctrl-C stops a reply; /quit or Ctrl-C twice to leave[/]",
        highlight=False,
    )
    keys = _CtrlC()
    loop = asyncio.get_running_loop()
    # no signal handlers off the main thread or on some platforms: Ctrl-C then just exits
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, keys.pressed)
    try:
        while True:
            incoming = await keys.until_leave(gateway.receive())
            if incoming is None:
                break
            keys.armed = False
            keys.turn = asyncio.create_task(_chat_turn(runtime, found, gateway, incoming))
            try:
                await keys.turn
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # we are being cancelled ourselves, not just the turn
                gateway.write_delta("\n")
                err_console.print(
                    "[dim](interrupted; what was said so far is kept. "
                    "Ctrl-C again or /quit to leave)[/]",
                    highlight=False,
                )
            finally:
                keys.turn = None
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
        await gateway.disconnect()


class _CtrlC:
    """What Ctrl-C means in an interactive chat: stop the turn, or (the second) leave."""

    def __init__(self) -> None:
        self.turn: asyncio.Task[None] | None = None
        self.armed = False  # the next Ctrl-C at the prompt leaves
        self.leave = asyncio.Event()

    def pressed(self) -> None:
        if self.turn is not None and not self.turn.done():
            self.turn.cancel()
            self.armed = True
        elif self.armed:
            self.leave.set()
        else:
            self.armed = True
            err_console.print("[dim](Ctrl-C again or /quit to leave)[/]", highlight=False)

    async def until_leave(self, reading: Awaitable[IncomingMessage]) -> IncomingMessage | None:
        """The next message, or None when the user leaves (Ctrl-C twice, /quit, end)."""
        line = asyncio.ensure_future(reading)
        leaving = asyncio.ensure_future(self.leave.wait())
        try:
            await asyncio.wait({line, leaving}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            leaving.cancel()
        if not line.done():
            line.cancel()
            return None
        try:
            return line.result()
        except EOFError:
            return None


async def _chat_turn(
    runtime: Runtime, agent: Agent, gateway: CliGateway, incoming: IncomingMessage
) -> None:
    """One turn through the turn service, streamed to the terminal by step type."""
    from opencrab.messages import MessageContent, MessageTarget, OutgoingMessage

    session_id = gateway.session_id
    streamed = False
    async for step in runtime.turns.chat_steps(
        agent, incoming.content.text, session_id=session_id, stream=True
    ):
        match step.type:
            case "token":
                gateway.write_delta(step.text)
                streamed = True
            case "action":
                if streamed:
                    gateway.write_delta("\n")
                    streamed = False
                _print_action(step)
            case "reply":
                if step.via == "message" and streamed:
                    gateway.write_delta("\n")
                else:
                    await gateway.send(
                        OutgoingMessage(
                            content=MessageContent(text=step.text),
                            target=MessageTarget(gateway="cli", session_id=session_id),
                        )
                    )
                streamed = False
            case "turn.failed":
                err_console.print(f"[bold red]error:[/] {escape(step.message)}", highlight=False)


# ------------------------------------------------------------------ memory, skills, workspace
@memory_app.command("search")
@exits_on_error
def memory_search(
    agent: AgentArg,
    query: Annotated[str, typer.Argument(help="Words to find (any language).")],
    limit: Annotated[int, typer.Option("--limit", "-l", min=1, max=100)] = 10,
    session: Annotated[str | None, typer.Option("--session", "-s")] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search the agent's session logs: full text (every word) fused with meaning
    (once the lines are embedded); each hit says which leg found it."""
    from opencrab.core.memory import MemoryManager

    with _agents(config, data_dir) as store:
        found = store.get(agent)
        result = MemoryManager(store.db, found.id).search_detail(
            query, limit=limit, session_id=session
        )
    hits = result.hits
    if as_json:
        print_json([h.model_dump(mode="json") for h in hits])
        return
    table = Table(title=f"{len(hits)} matches for {escape(query)!r}", caption=escape(result.note))
    for column in ("score", "found by", "type", "when", "session", "content"):
        table.add_column(column)
    for h in hits:
        table.add_row(
            f"{h.score:.3f}",
            "+".join(h.legs),
            h.log_type,
            h.created_at.strftime("%Y-%m-%d %H:%M"),
            h.session_id[:8],
            escape(h.content[:200]),
        )
    console.print(table)


@memory_app.command("index")
@exits_on_error
def memory_index(
    agent: AgentArg,
    now: Annotated[
        bool,
        typer.Option("--now", help="Embed the lines not yet embedded here, showing progress."),
    ] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """How far the agent's memory is embedded for meaning search ("embedded N of M with
    <model>"); a running server embeds in the background, --now does it in this process."""
    from opencrab.core.memory_index import MemoryIndexer, progress
    from opencrab.llm.router import LlmRouter

    with _agents(config, data_dir) as store:
        found = store.get(agent)
        if now:
            providers = LlmRouter.from_settings(store.settings).providers
            indexer = MemoryIndexer(store.db, store.settings, providers=providers)
            while indexer.index_agent(found.id, most=256):
                if not as_json:
                    err_console.print(progress(store.db, store.settings, found.id).text)
        shown = progress(store.db, store.settings, found.id)
    if as_json:
        print_json(shown.as_json())
        return
    console.print(escape(shown.text))
    console.print(escape(f"vectors searched {shown.vector_store}"))


memory_app.command("eval")(memory_eval)


def _skill_manager(db: Database, settings: Settings, agent: Agent) -> SkillManager:
    from opencrab.core.skill_files import load_skill_dirs
    from opencrab.core.skills import SkillManager, standard_skill_dirs

    docs, problems = load_skill_dirs(standard_skill_dirs(settings), agent.language)
    for problem in problems:
        err_console.print(f"[yellow]skill file skipped:[/] {escape(str(problem))}")
    manager = SkillManager(db, agent.id, docs)
    manager.ensure_default_skills()
    return manager


@skills_app.command("list")
@exits_on_error
def skills_list(
    agent: AgentArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """The agent's standard and acquired skills, with usage and effectiveness."""
    with _agents(config, data_dir) as store:
        found = store.get(agent)
        skills = _skill_manager(store.db, store.settings, found).list()
    if as_json:
        print_json([s.model_dump(mode="json") for s in skills])
        return
    table = Table(title=f"skills of {escape(found.name)}")
    for column in ("name", "source", "active", "uses", "effect", "actions", "description"):
        table.add_column(column)
    for s in skills:
        table.add_row(
            escape(s.name),
            s.source,
            "yes" if s.is_active else "no",
            str(s.usage_count),
            "" if s.effectiveness is None else f"{s.effectiveness:.2f}",
            ", ".join(s.actions),
            escape(s.description[:80]),
        )
    console.print(table)


@workspace_app.command("ls")
@exits_on_error
def workspace_ls(
    agent: AgentArg,
    path: Annotated[str, typer.Argument(help="A folder in the workspace.")] = "",
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a folder of the agent's workspace."""
    from opencrab.core.workspace import Workspace

    with _agents(config, data_dir) as store:
        found = store.get(agent)
    workspace = Workspace.for_agent(store.settings, found.id)
    entries = workspace.list(path)
    if as_json:
        print_json(
            [
                {
                    "name": e.name,
                    "path": e.path,
                    "isDir": e.is_dir,
                    "size": e.size,
                    "modified": e.modified.isoformat(),
                }
                for e in entries
            ]
        )
        return
    if not entries:
        where = f"{path.strip('/')}/ in the workspace" if path.strip("/") else "the workspace"
        console.print(f"{where} of {found.name} is empty", highlight=False, markup=False)
    for e in entries:
        size = "" if e.is_dir else f"{e.size:>10}"
        console.print(f"{size:>10}  {escape(e.path)}{'/' if e.is_dir else ''}", highlight=False)


# ------------------------------------------------------------------ heartbeat, discuss
@heartbeat_app.command("tick")
@exits_on_error
def heartbeat_tick(
    agent: AgentArg,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run one heartbeat tick of an agent now: cheap checks, then speak, learn or idle."""

    async def tick(runtime: Runtime) -> dict[str, Any]:
        found = runtime.agents.get(agent)
        from opencrab.core.heartbeat import heartbeat_scheduler, pulse_for

        scheduler = heartbeat_scheduler(runtime)
        scheduler.add(pulse_for(runtime, found, scheduler))
        done = await scheduler.tick_now(found.id)
        return {
            "agentId": found.id,
            "agent": found.name,
            "decision": done.decision,
            "reason": done.reason,
            "sessionId": done.session_id,
            "checks": done.checks,
            "result": done.result,
        }

    outcome = with_runtime(config, data_dir, tick)
    if as_json:
        print_json(outcome)
        return
    console.print(
        f"{escape(outcome['agent'])}: [bold]{outcome['decision']}[/] ({escape(outcome['reason'])})",
        highlight=False,
    )


_QUIET = {"send_noreact": "passes", "declare_done": "is done"}  # turns without a speech


@exits_on_error
def discuss(
    theme: Annotated[str, typer.Option("--theme", "-t", help="What to discuss.")],
    agents: Annotated[
        str, typer.Option("--agents", "-a", help="Participants, comma-separated names or ids.")
    ],
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, max=1000)] = 12,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="autonomous or facilitated (default: facilitated if --facilitator is given).",
        ),
    ] = None,
    facilitator: Annotated[
        str | None, typer.Option("--facilitator", "-f", help="The facilitating agent.")
    ] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a discussion between agents until everyone is done or max turns.

    Example: opencrab discuss --theme "tabs or spaces?" --agents ada,linus --max-turns 6
    """
    from opencrab.core.discussion import MODES, Discussion
    from opencrab.core.identity import AgentRole

    names = [n.strip() for n in agents.split(",") if n.strip()]
    chosen = mode or ("facilitated" if facilitator else "autonomous")
    if chosen not in MODES:
        raise typer.BadParameter(
            f"{chosen!r} is not one of {', '.join(MODES)}", param_hint="--mode"
        )
    _check_agents(config, data_dir, [*names, *([facilitator] if facilitator else [])])

    async def run(runtime: Runtime) -> dict[str, Any]:
        members = [runtime.agents.get(n) for n in names]
        lead = runtime.agents.get(facilitator) if facilitator else None
        if lead is not None and lead.role != AgentRole.facilitator():
            identity = lead.identity.model_copy(update={"role": AgentRole.facilitator()})
            runtime.agents.save_identity(lead.id, identity)
            lead = runtime.agents.get(lead.id)
        discussion = Discussion.create(
            runtime.db,
            theme=theme,
            participants=[m.id for m in members],
            mode=chosen,
            facilitator_id=lead.id if lead else None,
            max_turns=max_turns,
        )
        if not as_json:
            err_console.print(f"[dim]discussion {discussion.id}: {escape(theme)}[/]")

        def show_turn(turn: TurnOutcome) -> None:
            if as_json:
                return
            if turn.spoke:
                console.print(
                    f"[bold]{escape(turn.agent)}[/]: {escape(turn.spoke)}", highlight=False
                )
            else:
                note = turn.error or _QUIET.get(turn.action or "", turn.action or "no action")
                err_console.print(
                    f"[dim]{escape(turn.agent)}: ({escape(note)})[/]", highlight=False
                )

        outcome = await discussion.run(runtime, on_turn=show_turn)
        return outcome.as_json()

    result = with_runtime(config, data_dir, run)
    if as_json:
        print_json(result)
    else:
        err_console.print(f"[dim]ended: {result['endedBy']} after {len(result['turns'])} turns[/]")


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")
    app.command("chat")(chat)
    app.add_typer(memory_app, name="memory")
    app.add_typer(skills_app, name="skills")
    app.add_typer(workspace_app, name="workspace")
    app.add_typer(heartbeat_app, name="heartbeat")
    app.command("discuss")(discuss)
