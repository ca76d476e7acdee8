"""The FastAPI application factory."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

from opencrab import __version__
from opencrab.auth import TokenStore
from opencrab.config import Settings
from opencrab.core.runtime import Runtime
from opencrab.event_log import EventLog
from opencrab.llm.router import LlmRouter
from opencrab.plugins import server_plugin_manager
from opencrab.process import Role, running
from opencrab.server.a2a_http import mount_a2a
from opencrab.server.auth import BearerAuth, document_security
from opencrab.server.docs import install_docs
from opencrab.server.errors import document_validation_errors, install_error_handlers
from opencrab.server.guard import BrowserGuard
from opencrab.server.instance import MarkedFastAPI
from opencrab.server.limits import RequestLimits
from opencrab.server.mcp_http import MCP_PATH, McpEndpoint
from opencrab.server.routing import index_routes
from opencrab.server.scopes import check_route, document_scopes
from opencrab.store import Database

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    db: Database,
    *,
    router: LlmRouter | None = None,
    heartbeat: bool = False,
    tickets: bool = False,
    schedules: bool = False,
    auth: bool = False,
    gateways: bool = False,
    refresh_secs: float = 5.0,
    freeze_startup: bool = False,
) -> FastAPI:
    """Build the app over an opened, migrated database; routers come from plugins.

    The agent runtime (LLM router, actions, skills, engine) opens with the app's
    lifespan, and with it the server role's background services (opencrab.process: the
    tool sources first, the live-event hub, discussions and agent-mode sessions by lease,
    …), the MCP server at `/mcp` (opencrab.server.mcp_http) and, with `[a2a]` on, the A2A
    server at `/a2a/{agent}` (opencrab.server.a2a_http); `router` replaces the
    configured one (tests), `heartbeat` also runs the heartbeat scheduler for every agent
    (what `opencrab up` does), reading the agent list again every `refresh_secs` for
    agents changed by another process, `tickets` the ticket scheduler when `[tickets]
    enabled`, `schedules` the schedules when `[schedules] enabled`, `gateways` the chat
    gateways and `auth` the watch that ends the WebSockets of revoked tokens.
    `freeze_startup` (what `opencrab up` does) hands everything built until the app has
    started (the modules, the app, the runtime: some 300,000 objects) to `gc.freeze()`
    after a collection, so the garbage collector's full collections walk only what was
    made since (one full walk of the started heap took longer than a thousand reads of
    the agent list); they are unfrozen when the app stops. Every
    response carries this process's `X-OpenCrab-Instance` mark (opencrab.server.instance);
    every request first passes the Host check and the cross-site guard
    (opencrab.server.guard), then with `auth` the bearer check (opencrab.server.auth) and
    its token's scope (opencrab.server.scopes), then the body and WebSocket limits
    (opencrab.server.limits).

    Example:
        app = create_app(load_settings(), db)
        uvicorn.run(app, host="127.0.0.1", port=8080)
    """

    without = [
        name
        for name, wanted in (
            ("heartbeats", heartbeat),
            ("tickets", tickets),
            ("schedules", schedules),
            ("chat-gateways", gateways),
            ("token-watch", auth),
        )
        if not wanted
    ]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Runtime.open(settings, db=db, router=router) as runtime:
            app.state.runtime = runtime
            async with running(
                Role.SERVER, runtime, without=without, refresh_secs=refresh_secs
            ) as process:
                app.state.process = process
                for notice in runtime.notices:  # the tool sources' too, once they started
                    log.warning("%s", notice)
                app.state.heartbeats = process.heartbeats
                app.state.tickets = process.tickets
                app.state.schedules = process.schedules
                app.state.hub = process.hub
                app.state.discussions = process.discussions
                app.state.agent_mode = process.agent_mode
                app.state.token_watch = process.token_watch
                app.state.mcp = process.mcp
                app.state.inbox_counter = process.inbox_counter
                async with mcp.serving(runtime), a2a_serving(runtime):
                    if freeze_startup:
                        gc.collect()
                        gc.freeze()
                    try:
                        yield
                    finally:
                        if freeze_startup:
                            gc.unfreeze()
        db.close()

    app = MarkedFastAPI(
        dependencies=[Depends(check_route)],
        title="OpenCrab",
        version=__version__,
        description="Self-hosted autonomous LLM agents: REST API.",
        lifespan=lifespan,
        docs_url=None,  # served offline by install_docs
        redoc_url=None,
    )
    index_routes(app)
    app.state.settings = settings
    app.state.db = db
    app.state.event_log = EventLog(db)
    app.state.auth_required = auth
    install_error_handlers(app)
    install_docs(app)
    mcp = McpEndpoint()
    app.router.routes.append(Route(MCP_PATH, mcp))
    a2a_serving = mount_a2a(app, settings)
    server_plugin_manager().hook.register_routes(app=app)
    document_validation_errors(app)
    document_security(app, required=auth)
    document_scopes(app, required=auth)
    app.add_middleware(RequestLimits, rest=settings.gateway.rest)  # inside auth: knows tokens
    if auth:
        pages = getattr(app.state, "dashboard_paths", None)  # set by the dashboard plugin
        app.add_middleware(BearerAuth, tokens=TokenStore(db), pages=pages)
    origins = settings.gateway.rest.cors_origins
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(BrowserGuard, rest=settings.gateway.rest)  # outermost: before all else
    return app
