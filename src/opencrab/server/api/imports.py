"""Imported coding-agent transcripts (`opencrab import codex|claude`).

`GET /api/imports/sessions` lists import sessions (one per file), `GET
/api/imports/sessions/{id}` shows one with its problems, and
`GET /api/imports/sessions/{id}/messages` returns its lines as seed 003
NormalizedMessages (`opencrab.importers.normalized`, the type the parsers' output
validates as), in the seed's own (snake_case) field names. Encrypted reasoning is
shown only as its SHA-256 unless `?includeRaw=true`. A session's turns are also the
trace `/api/traces/{id}/events` (the session id is the trace id).

`GET /api/imports/search` searches the imported messages' text
(`opencrab.importers.search`), `GET /api/imports/costs` sums imported model calls' cost
per day and model, and `POST /api/imports` starts an import of a path on the server in
the background (202 with a job; `GET /api/imports/jobs/{id}` tells its progress,
`POST /api/imports/jobs/{id}/cancel` stops it between files). The path must lie under
`[imports] roots` (`opencrab.importers.roots`): one missing and one outside the roots get
the same 400.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import orjson
from fastapi import APIRouter, FastAPI, Path, Query, Request, Response
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.importers.common import ReadLimits
from opencrab.importers.jobs import ImportJob, ImportJobs
from opencrab.importers.normalized import NormalizedMessage, SourceType
from opencrab.importers.roots import ImportRoots
from opencrab.importers.sessions import import_sessions_page
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import transcripts
from opencrab.reports.transcripts import (
    DAY_PATTERN,
    ImportDayCost,
    ImportSearchHit,
    ImportSessionDetail,
    ImportSessionResponse,
    SessionOrder,
)
from opencrab.server.deps import AGENT_REF, AgentStoreDep, DatabaseDep, SettingsDep
from opencrab.server.schemas import ApiInput, ApiModel, Offset, error_responses

router = APIRouter(prefix="/api/imports", tags=["Imports"])

SessionId = Annotated[UUID, Path(alias="id", description="The import session's id.")]
JobId = Annotated[UUID, Path(alias="id", description="The import job's id.")]


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
    day: Annotated[
        str | None,
        Query(pattern=DAY_PATTERN, description="The UTC day the session started, YYYY-MM-DD."),
    ] = None,
    project: Annotated[
        str | None, Query(min_length=1, max_length=4096, description="The session's cwd.")
    ] = None,
    model: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    min_cost: Annotated[
        float | None,
        Query(
            alias="minCost", ge=0, le=1e9, description="Only sessions costing at least this (USD)."
        ),
    ] = None,
    sort: Annotated[
        SessionOrder,
        Query(
            description="newest first (the default), or by cost: cost_desc (high to low), cost_asc."
        ),
    ] = "newest",
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """Imported sessions, most recent first or by cost; `X-Total-Count` says how many match."""
    rows, total = import_sessions_page(
        db,
        source=source,
        agent_id=None if agent_id is None else agents.get(agent_id).id,
        day=day,
        project=project,
        model=model,
        min_cost=min_cost,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    response.headers["X-Total-Count"] = str(total)
    return [transcripts.session_json(row) for row in rows]


@router.get(
    "/sessions/{id}",
    operation_id="getImportSession",
    response_model=ImportSessionDetail,
    responses=error_responses(400, 404),
)
def get_import_session(session_id: SessionId, db: DatabaseDep) -> dict[str, Any]:
    """One import session, with its header and every line that had a problem."""
    return transcripts.session_detail(db, str(session_id))


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
    page, total = transcripts.messages_page(
        db,
        str(session_id),
        source_types=source_type,
        include_raw=include_raw,
        offset=offset,
        limit=limit,
    )
    return Response(
        orjson.dumps(page), media_type="application/json", headers={"X-Total-Count": str(total)}
    )


@router.get(
    "/search",
    operation_id="searchImports",
    response_model=list[ImportSearchHit],
    responses=error_responses(400),
)
async def search_imports(
    db: DatabaseDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="Words, all required.")],
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Offset = 0,
) -> list[Any]:
    """Imported user and assistant messages holding every word of `q`, newest first
    (sessions imported before the index existed are indexed on the first search)."""
    return await run_blocking(transcripts.search_hits, db, q, limit=limit, offset=offset)


@router.get(
    "/costs",
    operation_id="listImportCosts",
    response_model=list[ImportDayCost],
    responses=error_responses(400),
)
async def list_import_costs(db: DatabaseDep) -> list[Any]:
    """What imported sessions' model calls cost per UTC day and model, oldest first."""
    return await run_blocking(transcripts.day_costs, db)


class ImportStart(ApiInput):
    path: str = Field(min_length=1, max_length=4096, description="A file or directory.")
    source: Literal["codex", "claude"]
    agent_id: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)


class ImportJobProblem(ApiModel):
    file: str
    line: int
    reason: str


class ImportJobResponse(ApiModel):
    id: str
    source: Literal["codex", "claude"]
    path: str
    agent_id: str | None
    status: Literal["running", "cancelling", "cancelled", "done", "failed"] = Field(
        description="cancelling: asked to stop, storing the files read so far."
    )
    files_total: int = Field(description="Files found (0 while they are looked for).")
    files_done: int
    lines: int
    messages: int
    problems: int = Field(description="Problems so far (the first 100 in problemLines).")
    problem_lines: list[ImportJobProblem]
    session_ids: list[str]
    cost_usd: float
    error: str | None
    started_at: datetime
    finished_at: datetime | None


def _job(job: ImportJob) -> dict[str, Any]:
    return {
        **{name: getattr(job, name) for name in ImportJob.__dataclass_fields__},
        "problem_lines": [
            {"file": file, "line": line, "reason": reason}
            for file, line, reason in job.problem_lines
        ],
        "session_ids": list(job.session_ids),
    }


def _jobs(request: Request) -> ImportJobs:
    jobs: ImportJobs = request.app.state.import_jobs
    return jobs


@router.post(
    "",
    operation_id="startImport",
    status_code=202,
    response_model=ImportJobResponse,
    responses=error_responses(400, 404, 409),
)
async def start_import(
    body: ImportStart,
    request: Request,
    db: DatabaseDep,
    agents: AgentStoreDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    """Import the transcripts under a path on the server, in the background (400 when
    the path is not under `[imports] roots`, does not exist or is not readable, the same
    answer for the first two; 409 while another import runs; a path holding no
    transcripts fails the job)."""
    agent_id = None if body.agent_id is None else agents.get(body.agent_id).id
    limits = ReadLimits.of(settings.imports.max_decompressed_mb, settings.imports.max_lines)
    job = await run_blocking(
        _jobs(request).start,
        db,
        body.source,
        body.path,
        roots=ImportRoots.of(settings.imports.roots),
        agent_id=agent_id,
        limits=limits,
    )
    return _job(job)


@router.get(
    "/jobs/{id}",
    operation_id="getImportJob",
    response_model=ImportJobResponse,
    responses=error_responses(400, 404),
)
async def get_import_job(job_id: JobId, request: Request) -> dict[str, Any]:
    """An import job's progress: files done of the total, messages, problems."""
    return _job(_jobs(request).get(str(job_id)))


@router.post(
    "/jobs/{id}/cancel",
    operation_id="cancelImportJob",
    response_model=ImportJobResponse,
    responses=error_responses(400, 404, 409),
)
async def cancel_import_job(job_id: JobId, request: Request) -> dict[str, Any]:
    """Stop an import job after the file in hand (`cancelling`, then `cancelled`); the
    files imported so far stay imported (409 when it is already done or failed)."""
    return _job(_jobs(request).cancel(str(job_id)))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.state.import_jobs = ImportJobs()
    app.include_router(router)
