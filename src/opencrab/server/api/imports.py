"""Imported coding-agent transcripts (`opencrab import codex|claude`).

`GET /api/imports/sessions` lists import sessions (one per file), `GET
/api/imports/sessions/{id}` shows one with its problems, and
`GET /api/imports/sessions/{id}/messages` returns its lines as seed 003
NormalizedMessages (`opencrab.importers.normalized`, the type the parsers' output
validates as), in the seed's own (snake_case) field names. Encrypted reasoning is
shown only as its SHA-256 unless `?includeRaw=true`. A session's turns are also the
trace `/api/traces/{id}/events` (the session id is the trace id).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import orjson
from fastapi import APIRouter, FastAPI, Path, Query, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.importers.normalized import NormalizedMessage, SourceType
from opencrab.importers.sessions import (
    import_session,
    import_sessions_page,
    normalized_messages,
    session_problems,
)
from opencrab.plugins import hookimpl
from opencrab.server.deps import AGENT_REF, AgentStoreDep, DatabaseDep
from opencrab.server.schemas import ApiModel, Offset, error_responses

router = APIRouter(prefix="/api/imports", tags=["Imports"])

SessionId = Annotated[UUID, Path(alias="id", description="The import session's id.")]


class TokenTotals(ApiModel):
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    total_tokens: int


class ImportSessionResponse(ApiModel):
    id: str = Field(description="The import session; also the trace id of its events.")
    source: Literal["codex", "claude"]
    file_path: str
    external_id: str | None = Field(description="The session id the file gives itself.")
    agent_id: str | None
    title: str | None
    model: str | None
    provider: str | None
    started_at: datetime | None
    ended_at: datetime | None
    lines: int = Field(description="Lines imported so far.")
    messages: int
    messages_by_source_type: dict[str, int]
    problems: int
    calls: int = Field(description="Model calls the file records.")
    tokens: TokenTotals
    cost_usd: float
    created_at: datetime
    updated_at: datetime


class ImportProblem(ApiModel):
    line: int
    reason: str


class ImportSessionDetail(ImportSessionResponse):
    header: dict[str, Any] | None = Field(description="Session metadata from the file.")
    problem_lines: list[ImportProblem]


def _session(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "source": row.source,
        "file_path": row.file_path,
        "external_id": row.external_id,
        "agent_id": row.agent_id,
        "title": row.title,
        "model": row.model,
        "provider": row.provider,
        "started_at": row.started_at,
        "ended_at": row.ended_at,
        "lines": row.lines,
        "messages": row.messages,
        "messages_by_source_type": row.kinds_json or {},
        "problems": row.problems,
        "calls": row.calls,
        "tokens": {
            "input_tokens": row.input_tokens,
            "cached_input_tokens": row.cached_input_tokens,
            "output_tokens": row.output_tokens,
            "reasoning_output_tokens": row.reasoning_output_tokens,
            "total_tokens": row.total_tokens,
        },
        "cost_usd": row.cost_usd,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


@router.get(
    "/sessions",
    operation_id="listImportSessions",
    response_model=list[ImportSessionResponse],
    responses=error_responses(400, 404),
)
def list_import_sessions(
    db: DatabaseDep,
    agents: AgentStoreDep,
    response: Response,
    source: Literal["codex", "claude"] | None = None,
    agent_id: Annotated[
        str | None,
        Query(alias="agentId", min_length=1, max_length=MAX_NAME, description=AGENT_REF),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """Imported sessions, most recent first; `X-Total-Count` says how many match."""
    rows, total = import_sessions_page(
        db,
        source=source,
        agent_id=None if agent_id is None else agents.get(agent_id).id,
        limit=limit,
        offset=offset,
    )
    response.headers["X-Total-Count"] = str(total)
    return [_session(row) for row in rows]


@router.get(
    "/sessions/{id}",
    operation_id="getImportSession",
    response_model=ImportSessionDetail,
    responses=error_responses(400, 404),
)
def get_import_session(session_id: SessionId, db: DatabaseDep) -> dict[str, Any]:
    """One import session, with its header and every line that had a problem."""
    row = import_session(db, str(session_id))
    return {
        **_session(row),
        "header": row.header_json,
        "problem_lines": [
            {"line": line, "reason": reason} for line, reason in session_problems(db, row.id)
        ],
    }


@router.get(
    "/sessions/{id}/messages",
    operation_id="listImportMessages",
    response_model=list[NormalizedMessage],
    responses=error_responses(400, 404),
)
def list_import_messages(
    session_id: SessionId,
    db: DatabaseDep,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=5_000)] = 500,
    source_type: Annotated[list[SourceType] | None, Query(alias="sourceType")] = None,
    include_raw: Annotated[
        bool,
        Query(alias="includeRaw", description="Include encrypted reasoning as stored."),
    ] = False,
) -> Response:
    """The session's NormalizedMessages in file order (`X-Total-Count`: how many match)."""
    _, transcript = normalized_messages(db, str(session_id))
    messages = transcript.messages
    if source_type:
        wanted = set(source_type)
        messages = [m for m in messages if m["source_type"] in wanted]
    page = messages[offset : offset + limit]
    if not include_raw:
        page = [_hide_encrypted(m) for m in page]
    return Response(
        orjson.dumps(page),
        media_type="application/json",
        headers={"X-Total-Count": str(len(messages))},
    )


def _hide_encrypted(message: dict[str, Any]) -> dict[str, Any]:
    raw = message["raw"]
    if "encrypted_content" not in raw:
        return message
    return {**message, "raw": {k: v for k, v in raw.items() if k != "encrypted_content"}}


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
