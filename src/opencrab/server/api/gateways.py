"""Chat-platform gateways over HTTP (`/api/gateways/...`): the dashboard's Gateways page.

`GET /api/gateways` lists every chat-platform gateway registered (Slack, Discord, a
plugin's — opencrab.gateway.settings.platform_gateways): whether it is enabled, whether it
runs in this process and its link's state (connected / retrying with the error and the
next try / stopped), its settings (secrets by their last four characters only) and which
keys the config file sets (those win and are read-only here). `PUT /api/gateways/{name}`
`{"settings": {…}}` stores the dashboard's settings, checked against the gateway's config
model (400 naming the key); a secret left out or null keeps its stored value, "" removes
it. `POST /api/gateways/{name}/restart` rebuilds the gateway from its settings and
reconnects it in this process, the other gateways untouched.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Request
from pydantic import Field

from opencrab.errors import ConfigError, ValidationError
from opencrab.gateway.serve import ChatGateways
from opencrab.gateway.settings import gateway_view, model_of, platform_gateways, save_settings
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.server.deps import RuntimeDep, actor_of
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api/gateways", tags=["Gateways"])

Name = Annotated[str, Path(max_length=100, description="The gateway's registered name.")]


class LinkState(ApiModel):
    state: str = Field(description="starting, connected, retrying or stopped")
    since: float = Field(description="when it entered this state (Unix seconds)")
    attempts: int = Field(description="failed attempts in a row")
    error: str | None = None
    retry_in: float | None = Field(default=None, description="seconds to the next try")


class GatewayField(ApiModel):
    name: str
    kind: str = Field(description="bool, number, text, secret, choice, list or map")
    choices: list[str] = Field(default_factory=list)
    default: Any = None


class GatewayView(ApiModel):
    name: str
    enabled: bool
    running: bool = Field(description="whether it runs in this process")
    link: LinkState | None = Field(default=None, description="its platform link, when running")
    error: str | None = Field(default=None, description="its last failure to start here")
    values: dict[str, Any] = Field(description="its settings; a secret as …last4, or null")
    from_file: list[str] = Field(description="keys the config file sets (they win)")
    from_dashboard: list[str]
    fields: list[GatewayField]
    updated_at: datetime | None = None
    updated_by: str | None = None


class GatewaySettingsInput(ApiInput):
    settings: dict[str, Any] = Field(
        description="[gateway.<name>] keys (as in the config file) to store; a secret "
        'left out or null keeps its stored value, "" removes it'
    )


def _chats(request: Request) -> ChatGateways | None:
    process = getattr(request.app.state, "process", None)
    found: ChatGateways | None = getattr(process, "chat_gateways", None)
    return found


def _view(runtime: Any, chats: ChatGateways | None, name: str) -> GatewayView:
    return GatewayView.model_validate(gateway_view(runtime, chats, name))


@router.get("", operation_id="listGateways", response_model=list[GatewayView])
async def list_gateways(request: Request, runtime: RuntimeDep) -> list[GatewayView]:
    """Every chat-platform gateway: enabled, running here, its link, its settings."""
    chats = _chats(request)
    return [await run_blocking(_view, runtime, chats, name) for name in platform_gateways()]


@router.get(
    "/{name}",
    operation_id="getGateway",
    response_model=GatewayView,
    responses=error_responses(404),
)
async def get_gateway(name: Name, request: Request, runtime: RuntimeDep) -> GatewayView:
    """One chat-platform gateway."""
    model_of(name)
    return await run_blocking(_view, runtime, _chats(request), name)


@router.put(
    "/{name}",
    operation_id="updateGateway",
    response_model=GatewayView,
    responses=error_responses(400, 404, 409),
)
async def update_gateway(
    name: Name, body: GatewaySettingsInput, request: Request, runtime: RuntimeDep
) -> GatewayView:
    """Store the dashboard's settings (restart the gateway to use them)."""
    await run_blocking(save_settings, runtime, name, body.settings, actor=actor_of(request))
    return await run_blocking(_view, runtime, _chats(request), name)


@router.post(
    "/{name}/restart",
    operation_id="restartGateway",
    response_model=GatewayView,
    responses=error_responses(400, 404, 409),
)
async def restart_gateway(name: Name, request: Request, runtime: RuntimeDep) -> GatewayView:
    """Rebuild the gateway from its settings and reconnect it here (off: stopped)."""
    model_of(name)
    chats = _chats(request)
    if chats is None:
        raise ValidationError("this process runs no chat gateways (opencrab up runs them)")
    try:
        await chats.restart(name)
    except ConfigError as exc:
        raise ValidationError(f"{name} did not start: {exc}") from None
    return await run_blocking(_view, runtime, chats, name)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
