"""The inbox over HTTP (issue 37, section 2): `/api/inbox`.

GET /api/inbox lists everything waiting for a person across the fleet, newest first
(opencrab.reports.inbox: held tool calls, tickets' questions, agent-mode questions,
budget alerts, spend alarms), narrowed by `agent` (id or name) and `kind` (repeatable);
each item names what to answer (`subjectId`) and where it lives (`link`). Decide or
answer one with the route its page uses (approvals, a ticket session's messages, an
agent-mode task's answer); a budget alert or spend alarm is dismissed with POST
/api/inbox/{id}/dismiss. GET /api/inbox/deliveries shows how notifications went; PUT
/api/inbox/webhook-secret stores the webhook's signing secret encrypted (never shown).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Path, Query, Request
from pydantic import Field

from opencrab.core.agent import MAX_NAME
from opencrab.inbox.secret import MAX_SECRET, secret_source, set_webhook_secret
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import inbox
from opencrab.reports.inbox import Delivery, InboxItem, InboxView
from opencrab.reports.model import ApiModel
from opencrab.server.deps import RuntimeDep, actor_of
from opencrab.server.schemas import ApiInput, error_responses

router = APIRouter(prefix="/api", tags=["Inbox"])

ItemId = Annotated[
    str, Path(alias="id", max_length=300, description="The item's id (`<kind>:<subject>`).")
]


class InboxCount(ApiModel):
    count: int


class SecretInput(ApiInput):
    secret: str | None = Field(
        max_length=MAX_SECRET, description="16 to 512 characters; null removes it."
    )


class SecretState(ApiModel):
    source: str | None = Field(description="environment, stored, or null (none: not sent)")


@router.get(
    "/inbox",
    operation_id="getInbox",
    response_model=InboxView,
    responses=error_responses(400, 404),
)
async def get_inbox(
    runtime: RuntimeDep,
    agent: Annotated[str | None, Query(max_length=MAX_NAME, description="Id or name.")] = None,
    kind: Annotated[list[str] | None, Query(max_length=20)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> InboxView:
    """Items waiting for a person, newest first; `agent` and `kind` narrow them."""
    return await inbox.inbox_view(runtime, agent=agent, kinds=kind, limit=limit)


@router.get(
    "/inbox/count",
    operation_id="countInbox",
    response_model=InboxCount,
    responses=error_responses(400),
)
async def count_inbox(runtime: RuntimeDep) -> InboxCount:
    """How many items wait across the fleet (the top bar's number)."""
    return InboxCount(count=await inbox.inbox_count(runtime))


@router.get(
    "/inbox/deliveries",
    operation_id="listInboxDeliveries",
    response_model=list[Delivery],
    responses=error_responses(400),
)
async def list_deliveries(
    runtime: RuntimeDep,
    failed: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[Delivery]:
    """Notifications sent or failed, the latest first; `failed` lists the failures only."""
    return await inbox.deliveries(runtime, failed_only=failed, limit=limit)


@router.post(
    "/inbox/{id}/dismiss",
    operation_id="dismissInboxItem",
    response_model=InboxItem,
    responses=error_responses(400, 404),
)
async def dismiss_item(item_id: ItemId, runtime: RuntimeDep, request: Request) -> InboxItem:
    """Dismiss a budget alert or spend alarm (400 for another kind: answer it instead)."""
    return await inbox.dismiss(runtime, item_id, actor_of(request))


@router.get(
    "/inbox/webhook-secret",
    operation_id="getInboxWebhookSecret",
    response_model=SecretState,
    responses=error_responses(400),
)
async def get_secret(runtime: RuntimeDep) -> SecretState:
    """Where the webhook's signing secret comes from (never the secret)."""
    return SecretState(source=await run_blocking(secret_source, runtime))


@router.put(
    "/inbox/webhook-secret",
    operation_id="setInboxWebhookSecret",
    response_model=SecretState,
    responses=error_responses(400),
)
async def set_secret(body: SecretInput, runtime: RuntimeDep) -> SecretState:
    """Store the signing secret encrypted (the environment variable still wins)."""
    await run_blocking(set_webhook_secret, runtime, body.secret)
    return SecretState(source=await run_blocking(secret_source, runtime))


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
