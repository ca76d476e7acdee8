"""Tool calls waiting for a person (`/api/approvals`): list, read, approve, deny.

A call an agent's approval policy holds back (opencrab.core.approvals; set per tool with
`PUT /api/agents/{id}/tool-settings {"approvals": {"execute_command": "always"}}`) waits
here. Approve runs it once and records its result as the tool result; deny records
"denied by a person: <reason>" as an error result the agent sees. On a ticket's session
the ticket resumes (running, the same session active). The decider stored is the API
token's name ("local" on loopback without tokens); a `decidedBy` in the body is ignored.
Deciding one twice is 409 `already_decided`; an unknown id 404; a malformed one 400.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, FastAPI, Path, Query, Request
from pydantic import Field

from opencrab.core.approval_decisions import MAX_DECIDER, MAX_REASON
from opencrab.core.runtime import Runtime
from opencrab.plugins import hookimpl
from opencrab.reports import approvals
from opencrab.reports.approvals import ApprovalResponse, ApprovalStatus
from opencrab.server.deps import RuntimeDep, actor_of
from opencrab.server.schemas import ApiInput, Offset, error_responses

router = APIRouter(prefix="/api", tags=["Approvals"])

ApprovalId = Annotated[UUID, Path(alias="id", description="The approval's id.")]


class DecisionRequest(ApiInput):
    reason: str | None = Field(default=None, max_length=MAX_REASON)
    decided_by: str | None = Field(
        default=None,
        max_length=MAX_DECIDER,
        deprecated=True,
        description='Ignored: the decider is the API token\'s name ("local" without tokens).',
    )


@router.get(
    "/approvals",
    operation_id="listApprovals",
    response_model=list[ApprovalResponse],
    responses=error_responses(400),
)
def list_all(
    runtime: RuntimeDep,
    session_id: Annotated[UUID | None, Query(alias="sessionId")] = None,
    status: ApprovalStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[ApprovalResponse]:
    """Held tool calls, oldest first; `sessionId` and `status` narrow the list."""
    return approvals.approval_list(
        runtime,
        session_id=None if session_id is None else str(session_id),
        status=status,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/approvals/{id}",
    operation_id="getApproval",
    response_model=ApprovalResponse,
    responses=error_responses(400, 404),
)
def get(approval_id: ApprovalId, runtime: RuntimeDep) -> ApprovalResponse:
    """One held tool call with its decision, if made."""
    return approvals.approval_response(runtime.approvals.get(str(approval_id)))


async def _decide(
    runtime: Runtime, approval_id: UUID, body: DecisionRequest | None, *, approve: bool, by: str
) -> ApprovalResponse:
    body = body or DecisionRequest()
    record = await runtime.approvals.decide(
        str(approval_id), approve=approve, by=by, reason=body.reason
    )
    return approvals.approval_response(record)


@router.post(
    "/approvals/{id}/approve",
    operation_id="approveToolCall",
    response_model=ApprovalResponse,
    responses=error_responses(400, 404, 409),
)
async def approve(
    approval_id: ApprovalId,
    runtime: RuntimeDep,
    request: Request,
    body: DecisionRequest | None = None,
) -> ApprovalResponse:
    """Run the held call once; its result becomes the call's tool result (409 when it
    was decided already, or a turn runs in its session in another process)."""
    return await _decide(runtime, approval_id, body, approve=True, by=actor_of(request))


@router.post(
    "/approvals/{id}/deny",
    operation_id="denyToolCall",
    response_model=ApprovalResponse,
    responses=error_responses(400, 404, 409),
)
async def deny(
    approval_id: ApprovalId,
    runtime: RuntimeDep,
    request: Request,
    body: DecisionRequest | None = None,
) -> ApprovalResponse:
    """Answer the held call with an error the agent sees: "denied by a person: <reason>"."""
    return await _decide(runtime, approval_id, body, approve=False, by=actor_of(request))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
