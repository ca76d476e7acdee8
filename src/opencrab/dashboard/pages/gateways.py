"""The Gateways page (`/settings/gateways`): every chat-platform gateway (Slack, Discord,
a plugin's) as `GET /api/gateways` shows it (the same function,
opencrab.gateway.settings.gateway_view): its link's state (connected, retrying with the
error and the next try, stopped), and a form built from its config model (secrets as
password fields, allow-lists one per line; keys the config file sets are shown read-only,
since the file wins). Saving sends `PUT /api/gateways/{name}` then `POST
/api/gateways/{name}/restart` (`static/js/gateways.js`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.gateway.settings import gateway_view, platform_gateways
from opencrab.offload import run_blocking

router = APIRouter()


def _views(runtime: Runtime, chats: Any) -> list[dict[str, Any]]:
    return [gateway_view(runtime, chats, name) for name in platform_gateways()]


@router.get("/settings/gateways", response_class=HTMLResponse)
async def gateways_page(request: Request) -> HTMLResponse:
    """The chat-platform gateways, their state and settings; save and restart one."""
    runtime: Runtime = request.app.state.runtime
    chats = getattr(getattr(request.app.state, "process", None), "chat_gateways", None)
    views = await run_blocking(_views, runtime, chats)
    return render(request, "gateways.html", title="Gateways", gateways=views)
