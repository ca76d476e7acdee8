"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from opencrab import __version__
from opencrab.config import Settings
from opencrab.event_log import EventLog
from opencrab.plugins import server_plugin_manager
from opencrab.server.errors import install_error_handlers
from opencrab.store import Database


def create_app(settings: Settings, db: Database) -> FastAPI:
    """Build the app over an opened, migrated database; routers come from plugins.

    Example:
        app = create_app(load_settings(), db)
        uvicorn.run(app, host="127.0.0.1", port=8080)
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        db.close()

    app = FastAPI(
        title="OpenCrab",
        version=__version__,
        description="Self-hosted autonomous LLM agents: REST API.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.db = db
    app.state.event_log = EventLog(db)
    install_error_handlers(app)
    server_plugin_manager().hook.register_routes(app=app)
    return app
