"""An agent's memory as one download (`GET /api/agents/{id}/memory/export`).

The file holds everything the agent remembers: its curated memories, its impressions
of others and its whole session logs, grouped by session (most recently active
session first, each session's lines oldest first). `format=json` uses the same
camelCase records as the other memory routes (`MemoryExport` documents the shape);
`format=markdown` is the same content for people to read. The body is streamed and
the logs are read a batch at a time, so a long history never sits in memory whole;
lines written while the download runs may be left out. The attachment is named
`memory-<agent name>.json` or `.md` (an ASCII `filename`, the exact name in `filename*`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter

from opencrab.core.memory import CuratedMemory, Impression, MemoryManager, StoredLog
from opencrab.plugins import hookimpl
from opencrab.server.api.memory import (
    CuratedMemoryResponse,
    ImpressionResponse,
    SessionLogResponse,
)
from opencrab.server.api.workspace import content_disposition
from opencrab.server.deps import AgentDep
from opencrab.server.schemas import ApiModel, error_responses
from opencrab.store import Database

router = APIRouter(prefix="/api", tags=["Memory"])

EXPORT_FORMAT = "opencrab.memory/1"
ExportFormat = Literal["json", "markdown"]
MEDIA_TYPES = {"json": "application/json", "markdown": "text/markdown; charset=utf-8"}
SUFFIXES = {"json": "json", "markdown": "md"}


class ExportedAgent(ApiModel):
    id: str
    name: str
    language: str


class ExportedSession(ApiModel):
    session_id: str
    logs: list[SessionLogResponse]


class MemoryExport(ApiModel):
    """The JSON export: who, when, and everything remembered."""

    format: Literal["opencrab.memory/1"]
    agent: ExportedAgent
    exported_at: datetime
    curated: list[CuratedMemoryResponse]
    impressions: list[ImpressionResponse]
    sessions: list[ExportedSession]


class _Head(ApiModel):
    format: str
    agent: ExportedAgent
    exported_at: datetime
    curated: list[CuratedMemoryResponse]
    impressions: list[ImpressionResponse]


_LOGS = TypeAdapter(list[SessionLogResponse])


@router.get(
    "/agents/{id}/memory/export",
    operation_id="exportMemory",
    response_model=None,
    responses={
        200: {
            "model": MemoryExport,
            "description": "The memory as a file to save (JSON, or Markdown for people)",
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        },
        **error_responses(400, 404),
    },
)
def export_memory(
    agent: AgentDep,
    request: Request,
    format: Annotated[
        ExportFormat, Query(description="json (the MemoryExport record) or markdown.")
    ] = "json",
) -> StreamingResponse:
    """Download the agent's curated memories, impressions and session logs."""
    db: Database = request.app.state.db
    memory = MemoryManager(db, agent.id)
    head = _Head(
        format=EXPORT_FORMAT,
        agent=ExportedAgent(id=agent.id, name=agent.name, language=agent.language),
        exported_at=datetime.now(UTC),
        curated=[_curated(m) for m in memory.list_curated()],
        impressions=[_impression(i) for i in memory.all_impressions()],
    )
    sessions = [s.session_id for s in memory.sessions()]
    if format == "json":
        body = _json(head, memory, sessions)
    else:
        body = _markdown(head, memory, sessions, names={agent.id: agent.name})
    filename = f"memory-{agent.name}.{SUFFIXES[format]}"
    return StreamingResponse(
        (chunk.encode() for chunk in body),
        media_type=MEDIA_TYPES[format],
        headers={"Content-Disposition": content_disposition(filename)},
    )


def _curated(memory: CuratedMemory) -> CuratedMemoryResponse:
    return CuratedMemoryResponse.model_validate(memory.model_dump())


def _impression(impression: Impression) -> ImpressionResponse:
    return ImpressionResponse.model_validate(impression.model_dump())


def _logs(batch: list[StoredLog]) -> list[SessionLogResponse]:
    return [SessionLogResponse.model_validate(log.model_dump()) for log in batch]


def _json(head: _Head, memory: MemoryManager, sessions: list[str]) -> Iterator[str]:
    """The MemoryExport record, written a session batch at a time."""
    text = head.model_dump_json(by_alias=True)
    yield text[:-1] + ',"sessions":['
    for n, session_id in enumerate(sessions):
        yield ("," if n else "") + '{"sessionId":' + json.dumps(session_id) + ',"logs":['
        first = True
        for batch in memory.log_batches(session_id):
            items = _LOGS.dump_json(_logs(batch), by_alias=True).decode()[1:-1]
            yield items if first else "," + items
            first = False
        yield "]}"
    yield "]}\n"


def _markdown(
    head: _Head, memory: MemoryManager, sessions: list[str], *, names: dict[str, str]
) -> Iterator[str]:
    """The same content as Markdown: headings per part, one quote per log line.

    `names` turns speaker ids into names (the agent's own id into its name).
    """
    agent = head.agent
    yield (
        f"# Memory of {_line(agent.name)}\n\n"
        f"- Agent id: `{agent.id}`\n- Language: {agent.language}\n"
        f"- Exported: {_time(head.exported_at)}\n\n## Curated memories\n\n"
    )
    if not head.curated:
        yield "_None._\n\n"
    category = None
    for item in head.curated:
        if item.category != category:
            category = item.category
            yield f"### {_line(category)}\n\n"
        yield f"- {_indented(item.content)}\n  _(updated {_time(item.updated_at)})_\n"
    yield ("\n" if head.curated else "") + "## Impressions\n\n"
    if not head.impressions:
        yield "_None._\n\n"
    for imp in head.impressions:
        about = [f"Session `{imp.session_id}`"]
        if imp.last_updated_turn:
            about.append(f"turn {imp.last_updated_turn}")
        if imp.updated_at:
            about.append(f"updated {_time(imp.updated_at)}")
        yield f"### {_line(imp.target_name)}\n\n_{', '.join(about)}_\n\n"
        for label, value in (
            ("Personality", imp.personality),
            ("Communication style", imp.communication_style),
            ("Recent behaviour", imp.recent_behavior),
            ("Agreement", imp.agreement),
            ("Notes", imp.notes),
        ):
            if value:
                yield f"- {label}: {_indented(value)}\n"
        yield "\n"
    yield "## Session logs\n\n" + ("" if sessions else "_None._\n")
    for session_id in sessions:
        yield f"### Session `{session_id}`\n\n"
        for batch in memory.log_batches(session_id):
            yield "".join(_log_markdown(log, names) for log in batch)


def _log_markdown(log: StoredLog, names: dict[str, str]) -> str:
    about = [_time(log.created_at), log.log_type]
    if log.speaker_id:
        about.append(_line(names.get(log.speaker_id, log.speaker_id)))
    if log.turn_number is not None:
        about.append(f"turn {log.turn_number}")
    quoted = "\n".join(f"> {line}".rstrip() for line in log.content.splitlines() or [""])
    return f"**{' · '.join(about)}**\n\n{quoted}\n\n"


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _line(text: str) -> str:
    """Text for a heading or label: one line."""
    return " ".join(text.split())


def _indented(text: str) -> str:
    """Text continuing a list item: its later lines indented under the item."""
    return "\n  ".join(text.strip().splitlines())


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
