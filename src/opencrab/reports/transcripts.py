"""Imported transcripts as the API and the Transcripts page list and show them: import
sessions with their tokens and cost, one with its problems, its NormalizedMessages a page
at a time, the text search's hits and the cost per day and model."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from opencrab.importers.normalized import SourceType
from opencrab.importers.search import search
from opencrab.importers.sessions import (
    import_cost_by_day,
    import_session,
    normalized_messages,
    session_problems,
)
from opencrab.reports.model import ApiModel
from opencrab.store import Database

DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
SessionOrder = Literal["newest", "cost_desc", "cost_asc"]
"""The orders of the session list (see `imports_repo.SESSION_ORDERS`)."""


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
    project: str | None = Field(description="The working directory the session header names.")
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


def session_json(row: Any) -> dict[str, Any]:
    """An import session's row as `GET /api/imports/sessions` lists it."""
    return {
        "id": row.id,
        "source": row.source,
        "file_path": row.file_path,
        "external_id": row.external_id,
        "agent_id": row.agent_id,
        "title": row.title,
        "project": row.project,
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


class ImportSearchHit(ApiModel):
    session_id: str
    session_title: str | None
    source: Literal["codex", "claude"]
    line: int = Field(description="The file's line (1-based) holding the message.")
    role: Literal["user", "assistant"]
    timestamp: datetime
    snippet: str = Field(description="The text around the first word found.")


class ImportDayCost(ApiModel):
    day: str = Field(description="The UTC day, YYYY-MM-DD.")
    model: str
    calls: int
    cost_usd: float


def session_detail(db: Database, session_id: str) -> dict[str, Any]:
    """One import session, with its header and every line that had a problem."""
    row = import_session(db, session_id)
    return {
        **session_json(row),
        "header": row.header_json,
        "problem_lines": [
            {"line": line, "reason": reason} for line, reason in session_problems(db, row.id)
        ],
    }


def messages_page(
    db: Database,
    session_id: str,
    *,
    source_types: list[SourceType] | None,
    include_raw: bool,
    offset: int,
    limit: int,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the session's NormalizedMessages in file order (only `source_types`'s
    when given; encrypted reasoning left out unless `include_raw`), and how many match."""
    _, transcript = normalized_messages(db, session_id)
    messages = transcript.messages
    if source_types:
        wanted = set(source_types)
        messages = [m for m in messages if m["source_type"] in wanted]
    page = messages[offset : offset + limit]
    if not include_raw:
        page = [_hide_encrypted(m) for m in page]
    return page, len(messages)


def _hide_encrypted(message: dict[str, Any]) -> dict[str, Any]:
    raw = message["raw"]
    if "encrypted_content" not in raw:
        return message
    return {**message, "raw": {k: v for k, v in raw.items() if k != "encrypted_content"}}


def search_hits(db: Database, text: str, *, limit: int, offset: int) -> list[dict[str, Any]]:
    """Imported user and assistant messages holding every word of `text`, newest first."""
    return [asdict(hit) for hit in search(db, text, limit=limit, offset=offset)]


def day_costs(db: Database) -> list[dict[str, Any]]:
    """What imported model calls cost per UTC day and model, oldest first."""
    return [row._asdict() for row in import_cost_by_day(db)]
