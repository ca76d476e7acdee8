"""An agent's memory (seed 001 `/api/agents/{id}/memory…`).

Curated memory is what the agent keeps in its prompt (read, add, edit, delete here);
session logs are everything said and done, searchable in full text (every word of the
query must match; words are literal, never FTS syntax) fused with a search by meaning
once the lines are embedded (core/memory.py; `…/memory/index` shows how far the
background embedding is); impressions are what the agent
thinks of the others it met, one per session and person (written by its
`update_impression` action, read here). The export of all of it is in memory_export.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, FastAPI, Path, Query, Request, Response
from pydantic import Field

from opencrab.core.memory import Impression, LogType, MemoryManager, StoredLog
from opencrab.core.memory_eval import runs as memory_eval_runs
from opencrab.core.memory_index import progress
from opencrab.errors import NotFoundError
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses
from opencrab.store import Database

router = APIRouter(prefix="/api", tags=["Memory"])

MemoryId = Annotated[UUID, Path(alias="memory_id", description="The memory's id.")]
SessionId = Annotated[str, Path(alias="session_id", min_length=1, max_length=64)]


class CuratedMemoryResponse(ApiModel):
    id: str
    category: str
    content: str
    updated_at: datetime
    created_at: datetime | None = Field(default=None, description="When it was first kept.")
    times_seen: int = Field(
        default=1, description="How often it was said: the same said again is merged into it."
    )


class CuratedMemoryRequest(ApiInput):
    category: str = Field(min_length=1, max_length=64, examples=["core"])
    content: str = Field(min_length=1, max_length=20_000)


class SessionLogResponse(ApiModel):
    id: int
    session_id: str
    log_type: LogType
    content: str
    speaker_id: str | None = None
    turn_number: int | None = None
    metadata: dict[str, Any] | None = None
    event_id: str | None = None
    created_at: datetime


class SearchHit(SessionLogResponse):
    score: float = Field(description="Relevance: higher is better.")
    legs: list[Literal["lexical", "vector"]] = Field(
        description="The search legs that found the line: full text, meaning, or both."
    )


class IndexProgressResponse(ApiModel):
    """How far the agent's memory is embedded for the vector leg of search."""

    model: str = Field(description="The embedder the agent uses now (provider/model).")
    embedded: int = Field(description="Session log lines with a vector of that model.")
    total: int = Field(description="All the agent's session log lines.")
    error: str | None = Field(description="The last indexing pass's failure, if it failed.")
    text: str = Field(examples=["embedded 120 of 130 with opencrab/multilingual-e5-small"])
    vector_store: str = Field(
        description="Where the vector leg searches: in PostgreSQL (pgvector), or in process "
        "(numpy) and why.",
        examples=["in PostgreSQL (pgvector, HNSW cosine index)"],
    )


class SearchRequest(ApiInput):
    query: str = Field(min_length=1, max_length=1_000)
    limit: int = Field(default=10, ge=1, le=100)
    session_id: str | None = Field(default=None, max_length=64)
    log_types: list[LogType] | None = None


class ImpressionResponse(ApiModel):
    """What the agent thinks of another participant, as of one session (seed `impressions`)."""

    session_id: str
    target_id: str
    target_name: str
    personality: str
    communication_style: str
    recent_behavior: str
    agreement: str = Field(examples=["中立"])
    notes: str
    last_updated_turn: int
    updated_at: datetime | None = None


class SessionSummaryResponse(ApiModel):
    session_id: str
    entries: int
    first_at: datetime
    last_at: datetime


class EvalLegResponse(ApiModel):
    """One search leg's figures in an eval run (`available` false: the install has no
    such leg, and `note` says so; no figures then)."""

    available: bool
    note: str | None = None
    recall_at_1: float | None = Field(default=None, alias="recall@1")
    recall_at_5: float | None = Field(default=None, alias="recall@5")
    recall_at_10: float | None = Field(default=None, alias="recall@10")
    mrr: float | None = Field(default=None, description="Mean reciprocal rank (0 to 1).")
    p50_ms: float | None = Field(default=None, description="Median latency per question.")
    mean_ms: float | None = None
    errors: int | None = Field(default=None, description="Questions the leg refused.")


class EvalRunResponse(ApiModel):
    """One `opencrab memory eval` run: the questions asked and each leg's figures."""

    id: str
    questions: int
    generator: str = Field(description="builtin (keyword questions) or model (paraphrases).")
    legs: dict[str, EvalLegResponse]
    created_at: datetime


def _memory(request: Request, agent_id: str) -> MemoryManager:
    db: Database = request.app.state.db
    return MemoryManager(db, agent_id)


@router.get(
    "/agents/{id}/memory/curated",
    operation_id="listCuratedMemory",
    response_model=list[CuratedMemoryResponse],
    responses=error_responses(400, 404),
)
def list_curated_memory(
    agent: AgentDep,
    request: Request,
    category: Annotated[str | None, Query(max_length=64)] = None,
) -> list[Any]:
    """Curated memory, optionally of one category."""
    return _memory(request, agent.id).list_curated(category)


@router.post(
    "/agents/{id}/memory/curated",
    operation_id="addCuratedMemory",
    status_code=201,
    response_model=CuratedMemoryResponse,
    responses=error_responses(400, 404),
)
def add_curated_memory(agent: AgentDep, body: CuratedMemoryRequest, request: Request) -> Any:
    """Add a curated memory (category `core` is always in the agent's prompt); one saying
    the same as a memory of its category (the same text once normalised, or nearly all
    its character trigrams) is merged into that older one: its id, `timesSeen` + 1."""
    return _memory(request, agent.id).save_curated(body.category, body.content)


@router.put(
    "/agents/{id}/memory/curated/{memory_id}",
    operation_id="updateCuratedMemory",
    response_model=CuratedMemoryResponse,
    responses=error_responses(400, 404),
)
def update_curated_memory(
    agent: AgentDep, memory_id: MemoryId, body: CuratedMemoryRequest, request: Request
) -> Any:
    """Replace a curated memory's category and content."""
    return _memory(request, agent.id).save_curated(body.category, body.content, id=str(memory_id))


@router.delete(
    "/agents/{id}/memory/curated/{memory_id}",
    operation_id="deleteCuratedMemory",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404),
)
def delete_curated_memory(agent: AgentDep, memory_id: MemoryId, request: Request) -> Response:
    """Forget a curated memory."""
    _memory(request, agent.id).delete_curated(str(memory_id))
    return Response(status_code=204)


@router.post(
    "/agents/{id}/memory/search",
    operation_id="searchMemory",
    response_model=list[SearchHit],
    responses=error_responses(400, 404),
)
def search_memory(
    agent: AgentDep, body: SearchRequest, request: Request, response: Response
) -> list[Any]:
    """Session log lines for `query`, best first: those containing every word of it
    (lexical leg) fused by reciprocal rank with those nearest in meaning (vector leg, once
    the agent's lines are embedded). Each hit names its legs and its time (`createdAt`);
    the `X-Memory-Search` header says which legs ran and, when only the lexical one did,
    why. A query naming a time ("last Tuesday", 先週の火曜日, 昨日, 3日前, 2026-11-24)
    searches that span first in both legs (days in the server's time zone); the
    `X-Memory-Window` header gives the span as `from/to` (ISO 8601)."""
    found = _memory(request, agent.id).search_detail(
        body.query, limit=body.limit, session_id=body.session_id, log_types=body.log_types
    )
    # printable ASCII only: a model name from the config must not break the header
    note = "".join(c if 32 <= ord(c) < 127 else "?" for c in found.note)
    response.headers["X-Memory-Search"] = note
    if found.window is not None:
        span = f"{found.window.start.isoformat()}/{found.window.end.isoformat()}"
        response.headers["X-Memory-Window"] = span
    return found.hits


@router.get(
    "/agents/{id}/memory/index",
    operation_id="getMemoryIndexProgress",
    response_model=IndexProgressResponse,
    responses=error_responses(404),
)
def memory_index_progress(agent: AgentDep, request: Request) -> Any:
    """How many of the agent's session log lines are embedded with its embedder (the
    background indexer's progress; after a model change it starts again from 0)."""
    return progress(request.app.state.db, request.app.state.settings, agent.id).as_json()


@router.get(
    "/agents/{id}/memory/sessions",
    operation_id="listMemorySessions",
    response_model=list[SessionSummaryResponse],
    responses=error_responses(400, 404),
)
def list_memory_sessions(agent: AgentDep, request: Request) -> list[Any]:
    """Sessions the agent has logs in, most recently active first."""
    return _memory(request, agent.id).sessions()


@router.get(
    "/agents/{id}/memory/sessions/{session_id}",
    operation_id="getSessionLogs",
    response_model=list[SessionLogResponse],
    responses=error_responses(400, 404),
)
def get_session_logs(
    agent: AgentDep,
    session_id: SessionId,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    log_type: Annotated[list[LogType] | None, Query(alias="logType")] = None,
) -> list[StoredLog]:
    """A session's latest `limit` log lines, oldest first (404 when it has none at all)."""
    logs = _memory(request, agent.id).session_logs(session_id, limit=limit, log_types=log_type)
    if not logs and log_type is None:
        raise NotFoundError(f"agent {agent.name!r} has no logs in session {session_id!r}")
    return logs


@router.get(
    "/agents/{id}/memory/impressions",
    operation_id="listImpressions",
    response_model=list[ImpressionResponse],
    responses=error_responses(400, 404),
)
def list_impressions(
    agent: AgentDep,
    request: Request,
    session_id: Annotated[
        UUID | None, Query(alias="sessionId", description="Only those kept in this session.")
    ] = None,
) -> list[Impression]:
    """The agent's impressions of others, by the other's name (newest first for each)."""
    memory = _memory(request, agent.id)
    return memory.all_impressions() if session_id is None else memory.impressions(str(session_id))


@router.get(
    "/agents/{id}/memory/evals",
    operation_id="listMemoryEvals",
    response_model=list[EvalRunResponse],
    response_model_by_alias=True,
    responses=error_responses(400, 404),
)
def list_memory_evals(
    agent: AgentDep,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[Any]:
    """The agent's memory eval runs (`opencrab memory eval`), newest first: recall@1/5/10,
    MRR and latency of each search leg on questions built from its own memory."""
    db: Database = request.app.state.db
    return [run.model_dump() for run in memory_eval_runs(db, agent.id, limit=limit)]


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
