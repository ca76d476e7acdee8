"""`opencrab import codex|claude PATH…`: coding-agent transcripts into OpenCrab.

Each file becomes an import session: its lines are kept (so the API can show them as
seed 003 NormalizedMessages), its turns go into the event log and the chosen agent's
memory, and its model calls into the LLM metrics. Running it again imports only what
was appended since; see `opencrab.importers.store`. The command reads whatever its
user names (it runs with that user's own rights): `[imports] roots` limits only imports
started over the API and the dashboard (`opencrab.importers.roots`). `opencrab import
search` finds imported messages by their words and shows them as they were written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
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
)
from opencrab.errors import NotFoundError, ValidationError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # loaded when a command runs, not for `--help`
    from opencrab.config import Settings
    from opencrab.importers.results import FileResult, ImportSummary
    from opencrab.importers.store import Importer
    from opencrab.store import Database

import_app = typer.Typer(
    help="Import coding-agent transcripts (Codex CLI, Claude Code) into the event log, "
    "an agent's memory and the LLM metrics.",
    no_args_is_help=True,
)

PathsArgument = Annotated[
    list[Path],
    typer.Argument(help="Files or folders to import (folders are searched recursively)."),
]
AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        help="The agent whose memory the transcripts join (name or id); "
        "defaults to the only agent, if there is just one.",
        show_default=False,
    ),
]


@import_app.command()
@exits_on_error
def codex(
    paths: PathsArgument,
    agent: AgentOption = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Codex CLI rollouts: `rollout-*.jsonl` and `.jsonl.zst` (e.g. ~/.codex/sessions).

    Running it again imports only what was appended since.

    Example: opencrab import codex ~/.codex/sessions --agent coder
    """
    _import("codex", paths, agent, config, data_dir, as_json)


@import_app.command()
@exits_on_error
def claude(
    paths: PathsArgument,
    agent: AgentOption = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Claude Code sessions: `*.jsonl` (e.g. ~/.claude/projects).

    Running it again imports only what was appended since.

    Example: opencrab import claude ~/.claude/projects --agent coder
    """
    _import("claude", paths, agent, config, data_dir, as_json)


def _import(
    source: str,
    paths: list[Path],
    agent: str | None,
    config: Path | None,
    data_dir: Path | None,
    as_json: bool,
) -> None:
    from opencrab.importers.common import ReadLimits, file_size
    from opencrab.importers.store import Importer

    missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        verb = "does" if len(missing) == 1 else "do"
        raise NotFoundError(f"{', '.join(missing)} {verb} not exist: nothing was imported")
    settings = settings_from(config, data_dir)
    db = open_store(settings)
    try:
        limits = ReadLimits.of(settings.imports.max_decompressed_mb, settings.imports.max_lines)
        importer = Importer(db, source, limits=limits)
        files, _ = importer.find(paths)
        if not files:
            where = ", ".join(str(p) for p in paths)
            raise NotFoundError(f"no {_NAMES[source]} found under {where}")
        importer.agent_id = _agent_id(db, settings, agent)
        summary = _run(importer, paths, sum(file_size(f) for f in files))
    finally:
        db.close()
    data = summary.as_json()
    if as_json:
        print_json(data)
    else:
        _print(data)


_NAMES = {"codex": "Codex rollouts (rollout-*.jsonl)", "claude": "Claude Code sessions (*.jsonl)"}


def _agent_id(db: Database, settings: Settings, agent: str | None) -> str | None:
    from opencrab.core.agent import AgentStore

    store = AgentStore(db, settings)
    if agent is not None:
        return store.get(agent).id
    agents = store.summaries()
    if len(agents) == 1:
        return agents[0][0]
    if not agents:
        return None  # events and metrics only; said in the summary
    names = ", ".join(name for _, name, _ in agents)
    raise ValidationError(f"there are several agents: choose one with --agent ({names})")


def _run(importer: Importer, paths: list[Path], total: int) -> ImportSummary:
    if not sys.stderr.isatty():
        return importer.run(paths)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[file]}", markup=False),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"importing {importer.source.name}", total=total, file="")

        def advance(result: FileResult, size: int) -> None:
            bar.update(task, advance=size, file=Path(result.path).name)

        return importer.run(paths, progress=advance)


def _print(data: dict[str, Any]) -> None:
    status = ", ".join(f"{n} {s}" for s, n in sorted(data["files_by_status"].items()))
    console.print(
        f"{_count(data['files'], 'file')} ({status}): {data['lines']} new lines, "
        f"{data['messages']} messages, {data['events']} events, {data['calls']} model calls",
        highlight=False,
        markup=False,
    )
    if data["messages_by_source_type"]:
        table = Table(title="messages by source_type")
        table.add_column("source_type")
        table.add_column("messages", justify="right")
        for kind, count in data["messages_by_source_type"].items():
            table.add_row(escape(kind), str(count))
        console.print(table)
    tokens = data["tokens"]
    if tokens["total_tokens"]:
        console.print(
            f"tokens: {tokens['input_tokens']:,} in ({tokens['cached_input_tokens']:,} cached), "
            f"{tokens['output_tokens']:,} out ({tokens['reasoning_output_tokens']:,} reasoning), "
            f"{tokens['total_tokens']:,} total; cost ${data['cost_usd']:.4f}",
            highlight=False,
            markup=False,
        )
    for model in data["models_without_price"]:
        provider, _, name = model.partition("/")
        err_console.print(
            f"no price for {model}: its calls cost 0 until it has one "
            f"(opencrab llm price {provider} {name} --input … --output … --reprice)",
            highlight=False,
            markup=False,
        )
    if data["agent_id"] is None and data["events"]:
        err_console.print(
            "there is no agent yet: the turns are in the event log and the metrics, "
            "in no agent's memory",
            highlight=False,
            markup=False,
        )
    for problem in data["problems"]:
        err_console.print(
            f"{problem['file']}:{problem['line']}: {problem['reason']}",
            highlight=False,
            markup=False,
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@import_app.command()
@exits_on_error
def search(
    words: Annotated[list[str], typer.Argument(help="Words that must all occur.")],
    limit: Annotated[int, typer.Option(min=1, max=200, help="How many messages.")] = 20,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Imported user and assistant messages holding every word, newest first.

    Example: opencrab import search "make && make test"
    """
    from opencrab.importers.search import search as search_imports

    db = open_store(settings_from(config, data_dir))
    try:
        hits = search_imports(db, " ".join(words), limit=limit)
    finally:
        db.close()
    if as_json:
        print_json([{**vars(h), "timestamp": h.timestamp.isoformat()} for h in hits])
        return
    if not hits:
        console.print("no imported message holds every word", highlight=False, markup=False)
    for hit in hits:
        title = hit.session_title or hit.session_id
        console.print(
            f"{hit.timestamp:%Y-%m-%d %H:%M} {hit.role} · {title} (line {hit.line})",
            style="bold",
            highlight=False,
            markup=False,
        )
        console.print(f"  {hit.snippet}", highlight=False, markup=False, soft_wrap=True)


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
