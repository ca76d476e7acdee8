"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from opencrab import __version__
from opencrab.agentmode.credentials import SubAgentCredentials
from opencrab.agentmode.runner import open_runner
from opencrab.auth import TokenStore
from opencrab.config import Settings
from opencrab.core.discussion import DiscussionRunner
from opencrab.core.runtime import Runtime
from opencrab.core.tool_sources import start_tool_sources
from opencrab.event_log import EventLog
from opencrab.gateway.serve import start_chat_gateways, stop_chat_gateways
from opencrab.llm.router import LlmRouter
from opencrab.plugins import server_plugin_manager
from opencrab.reports.agent_mode import agent_mode_notice
from opencrab.server.auth import BearerAuth, TokenWatch, document_security
from opencrab.server.docs import install_docs
from opencrab.server.errors import (
    document_validation_errors,
    install_error_handlers,
    refuse_unknown_query,
    refuse_unreadable_json,
)
from opencrab.server.guard import BrowserGuard
from opencrab.server.instance import MarkedFastAPI
from opencrab.server.limits import RequestLimits
from opencrab.server.live import EventHub
from opencrab.server.scopes import document_scopes, require_scope
from opencrab.store import Database
from opencrab.tickets.scheduler import start_tickets

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    db: Database,
    *,
    router: LlmRouter | None = None,
    heartbeat: bool = False,
    tickets: bool = False,
    auth: bool = False,
    gateways: bool = False,
    refresh_secs: float = 5.0,
) -> FastAPI:
    """Build the app over an opened, migrated database; routers come from plugins.

    The agent runtime (LLM router, actions, skills, engine) opens with the app's
    lifespan, and with it the tool sources (core/tool_sources.py), before anything else
    and stopped after it; `router` replaces the configured one (tests), `heartbeat` also runs the
    heartbeat scheduler for every agent (what `opencrab up` does), reading the agent list
    again every `refresh_secs` for agents changed by another process, and `tickets` the
    ticket scheduler when `[tickets] enabled`. Every response carries
    this process's `X-OpenCrab-Instance` mark (opencrab.server.instance); every request
    first passes the Host check and the cross-site guard (opencrab.server.guard), then
    with `auth` the bearer check (opencrab.server.auth) and its token's scope
    (opencrab.server.scopes), then the body and WebSocket limits (opencrab.server.limits).

    Example:
        app = create_app(load_settings(), db)
        uvicorn.run(app, host="127.0.0.1", port=8080)
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            Runtime.open(settings, db=db, router=router) as runtime,
            AsyncExitStack() as last,
        ):
            app.state.runtime = runtime
            sources = await start_tool_sources(runtime)  # first: the registry is whole
            last.push_async_callback(sources.stop)  # last, also when a start below fails
            for notice in runtime.notices:
                log.warning("%s", notice)
            beats = await runtime.start_heartbeats(refresh_secs=refresh_secs) if heartbeat else None
            app.state.heartbeats = beats
            scheduler = app.state.tickets = start_tickets(runtime) if tickets else None
            runtime.approvals.follow_ups.start()  # stopped when the runtime closes
            hub = app.state.hub = EventHub(db)
            runtime.on_write.append(hub.nudge)
            feed = asyncio.create_task(hub.run(), name="live-events")
            chats = await start_chat_gateways(runtime) if gateways else []
            discussions = app.state.discussions = DiscussionRunner(runtime)
            discussions.listeners.append(
                lambda session_id, message: hub.announce(
                    session_id,
                    json.dumps(
                        {**message, "sessionId": session_id}, ensure_ascii=False, default=str
                    ),
                )
            )
            discussions.resume()
            agent_mode = app.state.agent_mode = open_runner(
                settings, db, credentials=SubAgentCredentials(runtime.llm_settings)
            )
            agent_mode.listeners.append(
                lambda session_id, task_id: hub.announce(
                    session_id, agent_mode_notice(agent_mode, session_id, task_id)
                )
            )
            if heartbeat:  # `opencrab up`: watch the sessions that were running again
                await agent_mode.resume_started()
            watch = app.state.token_watch = TokenWatch(TokenStore(db)) if auth else None
            watching = asyncio.create_task(watch.run(), name="token-watch") if watch else None
            try:
                yield
            finally:
                if scheduler is not None:  # first: its turns may still write
                    await scheduler.stop()
                if watch is not None and watching is not None:
                    watch.stop()
                    await watching
                await discussions.close()
                await agent_mode.close()
                await stop_chat_gateways(chats)
                await hub.stop()
                await feed
                if beats is not None:
                    await beats.stop()
        db.close()

    app = MarkedFastAPI(
        dependencies=[
            Depends(require_scope),
            Depends(refuse_unknown_query),
            Depends(refuse_unreadable_json),
        ],
        title="OpenCrab",
        version=__version__,
        description="Self-hosted autonomous LLM agents: REST API.",
        lifespan=lifespan,
        docs_url=None,  # served offline by install_docs
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.db = db
    app.state.event_log = EventLog(db)
    app.state.auth_required = auth
    install_error_handlers(app)
    install_docs(app)
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
