"""An agent's workspace over HTTP (seed 001 `/api/agents/{id}/workspace…`).

The same jail as the agent's own ws_* actions (core/workspace.py): every path is checked
before the filesystem is touched, so `..`, absolute paths, backslashes, control
characters and symlinks are refused with 400. Files go up as the raw request body of a
PUT (any content type), streamed to disk and reserved against the workspace's quota and
file cap as they arrive (core/workspace_upload.py): over either, 413 and nothing kept. So
an upload is not held to `[gateway.rest] max_body_kb` as other bodies are (server/limits.py):
its quota is its limit.
They come down as raw bytes. Downloads
are served with `nosniff` and a sandboxing Content-Security-Policy: a page an agent wrote
cannot run script in the dashboard's origin; `?download=true` names the file with an ASCII
`filename` and the exact name as RFC 5987 `filename*`.
"""

from __future__ import annotations

import contextlib
import mimetypes
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, HTTPException, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from opencrab.config import Settings
from opencrab.core.workspace import Workspace
from opencrab.core.workspace_upload import Upload
from opencrab.errors import QuotaExceeded
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep
from opencrab.server.limits import takes_upload
from opencrab.server.schemas import ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Workspace"])

FilePath = Annotated[
    str, Path(description="A path inside the workspace, e.g. notes/today.md.", max_length=1024)
]
WRITE_BYTES = 256 * 1024  # an upload is written in pieces of about this size
SAFE_DOWNLOAD_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


class WorkspaceEntry(ApiModel):
    name: str
    path: str
    is_dir: bool
    size: int
    modified: datetime


class WorkspaceListing(ApiModel):
    path: str
    entries: list[WorkspaceEntry]
    usage_bytes: int
    quota_bytes: int


class WrittenFile(ApiModel):
    path: str
    size: int
    created: bool


def content_disposition(name: str) -> str:
    """`attachment` naming the file: an ASCII `filename` and the exact UTF-8 name as
    RFC 6266 / RFC 5987 `filename*` (a header cannot carry it raw)."""
    fallback = "".join(c if " " <= c < "\x7f" and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _workspace(request: Request, agent_id: str) -> Workspace:
    settings: Settings = request.app.state.settings
    return Workspace.for_agent(settings, agent_id)


@router.get(
    "/agents/{id}/workspace",
    operation_id="listWorkspace",
    response_model=WorkspaceListing,
    responses=error_responses(400, 404),
)
def list_workspace(
    agent: AgentDep,
    request: Request,
    path: Annotated[str, Query(max_length=1024, description="A folder; the root if empty.")] = "",
) -> dict[str, Any]:
    """A folder's entries (folders first), with the workspace's usage and quota."""
    ws = _workspace(request, agent.id)
    entries = ws.list(path)
    return {
        "path": path,
        "entries": [vars(e) for e in entries],
        "usage_bytes": ws.usage_bytes(),
        "quota_bytes": ws.max_size_bytes,
    }


@router.get(
    "/agents/{id}/workspace/{path:path}",
    operation_id="readWorkspaceFile",
    response_class=Response,
    responses={
        200: {
            "description": "The file's bytes",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        },
        **error_responses(400, 404),
    },
)
def read_workspace_file(
    agent: AgentDep,
    path: FilePath,
    request: Request,
    download: Annotated[bool, Query(description="Ask the browser to save the file.")] = False,
) -> Response:
    """Download a file: its raw bytes, typed by its extension."""
    data = _workspace(request, agent.id).read_bytes(path)
    media_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
    headers = dict(SAFE_DOWNLOAD_HEADERS)
    if download:
        headers["Content-Disposition"] = content_disposition(path.rsplit("/", 1)[-1])
    return Response(content=data, media_type=media_type, headers=headers)


@router.put(
    "/agents/{id}/workspace/{path:path}",
    operation_id="writeWorkspaceFile",
    response_model=WrittenFile,
    responses={
        201: {"model": WrittenFile, "description": "Created"},
        **error_responses(400, 404, 413),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
@takes_upload  # not held to [gateway.rest] max_body_kb: the quota is its limit
async def write_workspace_file(
    agent: AgentDep, path: FilePath, request: Request, response: Response
) -> dict[str, Any]:
    """Upload a file: the request body is stored as is (201 when new, 200 when replaced).

    Parent folders are created; a body that would take the workspace over its quota or
    its file cap is refused with 413 and nothing is written. The body is streamed to
    disk, room reserved before each piece; a declared Content-Length is reserved at once.
    """
    ws = _workspace(request, agent.id)
    ws.check(path)  # a bad path is refused before the body is read
    declared = _content_length(request)
    if declared is not None and declared > ws.max_size_bytes:
        raise HTTPException(
            413, f"the upload is over the workspace quota of {ws.max_size_bytes} bytes"
        )
    try:
        upload = await run_in_threadpool(Upload, ws, path, expected=declared)
    except QuotaExceeded:
        await _drain(request, declared)
        raise
    try:
        pending = bytearray()
        async for chunk in request.stream():
            pending += chunk
            if len(pending) >= WRITE_BYTES:
                piece, pending = pending, bytearray()
                await run_in_threadpool(upload.write, piece)
        await run_in_threadpool(upload.write, pending)
        created = await run_in_threadpool(upload.commit)
    except QuotaExceeded:
        await _drain(request, declared)
        raise
    finally:
        await run_in_threadpool(upload.close)
    response.status_code = 201 if created else 200
    return {"path": path, "size": upload.written, "created": created}


def _content_length(request: Request) -> int | None:
    value = request.headers.get("content-length", "")
    return int(value) if value.isdigit() else None


async def _drain(request: Request, declared: int | None) -> None:
    """Read (and drop) the rest of a refused body the client declared, so that it gets
    the 413 rather than a reset connection; a body of unknown length is not waited for."""
    if declared is None:
        return
    with contextlib.suppress(ClientDisconnect):
        async for _ in request.stream():
            pass


@router.delete(
    "/agents/{id}/workspace/{path:path}",
    operation_id="deleteWorkspaceFile",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404),
)
def delete_workspace_file(agent: AgentDep, path: FilePath, request: Request) -> Response:
    """Delete a file, or a folder with everything in it."""
    _workspace(request, agent.id).delete(path)
    return Response(status_code=204)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
