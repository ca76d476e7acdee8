"""The plugin that puts the dashboard into the app (`[dashboard] enabled`).

It mounts `static/` at `/static/dashboard`, includes every page router, and installs
the HTML error pages: a missing page or a failed request for a page renders
`error.html` (with a way back) where the API would answer JSON.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.requests import HTTPConnection

from opencrab.dashboard.login import LOGIN_PATH, OPEN_PAGES
from opencrab.dashboard.render import HERE, PAGE_HEADERS, STATIC_URL, environment
from opencrab.plugins import hookimpl
from opencrab.server.auth import DashboardPaths

PAGE_MODULES = (
    "opencrab.dashboard.login",
    "opencrab.dashboard.pages.home",
    "opencrab.dashboard.pages.persona",
    "opencrab.dashboard.pages.skills",
    "opencrab.dashboard.pages.chat",
    "opencrab.dashboard.pages.common",
    "opencrab.dashboard.pages.memory",
    "opencrab.dashboard.pages.workspace",
    "opencrab.dashboard.pages.sessions",
    "opencrab.dashboard.pages.discussions",
    "opencrab.dashboard.pages.session_view",
    "opencrab.dashboard.pages.tickets",
    "opencrab.dashboard.pages.schedules",
    "opencrab.dashboard.pages.inbox",
    "opencrab.dashboard.pages.analytics",
    "opencrab.dashboard.pages.budgets",
    "opencrab.dashboard.pages.costs",
    "opencrab.dashboard.pages.llm_settings",
    "opencrab.dashboard.pages.mcp",
    "opencrab.dashboard.pages.gateways",
    "opencrab.dashboard.pages.transcripts",
    "opencrab.dashboard.pages.traces",
    "opencrab.dashboard.pages.agent_mode",
    "opencrab.dashboard.pages.agent_tools",
    "opencrab.dashboard.pages.seed_routes",
)
"""Each module has a `router`; later areas add theirs here."""

TITLES = {400: "Bad request", 401: "Not signed in", 403: "Forbidden", 404: "Not found"}


class DashboardErrors:
    """Error pages for the dashboard's paths (see opencrab.server.errors.ErrorPages)."""

    def __init__(self, paths: DashboardPaths) -> None:
        self.paths = paths

    def is_page(self, path: str) -> bool:
        return self.paths.is_page(path)

    def render(
        self,
        request: HTTPConnection,
        status: int,
        message: str,
        headers: Mapping[str, str] | None,
    ) -> Response:
        title = TITLES.get(status, "Something went wrong" if status >= 500 else "Refused")
        if status == 404 and message == "Not Found":  # no route at all: say which path
            message = f"There is no page at {request.url.path}."
        html = (
            environment()
            .get_template("error.html")
            .render(
                request=request,
                path=request.url.path,
                title=title,
                status=status,
                message=message,
                login_required=bool(getattr(request.app.state, "auth_required", False)),
            )
        )
        return Response(
            html,
            status_code=status,
            headers={**PAGE_HEADERS, **(headers or {})},
            media_type="text/html",
        )


def install_dashboard(app: FastAPI) -> None:
    """Mount the pages, their assets and their error pages into `app`."""
    import importlib

    app.mount(STATIC_URL, StaticFiles(directory=HERE / "static"), name="dashboard-static")
    for name in PAGE_MODULES:
        app.include_router(importlib.import_module(name).router, include_in_schema=False)
    paths = DashboardPaths(login=LOGIN_PATH, open_paths=OPEN_PAGES)
    app.state.dashboard_paths = paths
    app.state.error_pages = DashboardErrors(paths)


@hookimpl
def register_routes(app: FastAPI) -> None:
    if app.state.settings.dashboard.enabled:
        install_dashboard(app)
