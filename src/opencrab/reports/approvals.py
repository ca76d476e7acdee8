"""Tool calls waiting for a person (`/api/approvals`) as the API shows them, validated
from the approvals repository's records."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from opencrab.core.runtime import Runtime
from opencrab.reports.model import ApiModel
from opencrab.store.repositories.approvals import ApprovalRecord, ApprovalStatus

__all__ = ["ApprovalResponse", "ApprovalStatus", "approval_list", "approval_response"]


class ApprovalResponse(ApiModel):
    id: UUID
    session_id: UUID
    agent_id: UUID
    tool_name: str
    arguments: Any = Field(description="The call's arguments as the model made them.")
    status: ApprovalStatus
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    reason: str | None = Field(default=None, description="Why it was denied (or approved).")
    result_event_id: UUID | None = Field(
        default=None, description="The tool_result event the decision wrote."
    )


def approval_response(record: ApprovalRecord) -> ApprovalResponse:
    """The API shape of an approval (its record's fields, ids as UUIDs)."""
    return ApprovalResponse.model_validate(record, from_attributes=True)


def approval_list(
    runtime: Runtime,
    *,
    session_id: str | None,
    status: ApprovalStatus | None,
    limit: int,
    offset: int,
) -> list[ApprovalResponse]:
    """Held tool calls, oldest first; `session_id` and `status` narrow the list."""
    found = runtime.approvals.list_approvals(
        session_id=session_id, status=status, limit=limit, offset=offset
    )
    return [approval_response(r) for r in found]
