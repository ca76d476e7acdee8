"""The API's documentation pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), offline.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank without
network access. These load the same libraries from `static/vendor/` (copied from the
npm registry with their licences; see the README there), served under `/static/vendor`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

VENDOR_DIR = Path(__file__).parent / "static" / "vendor"
VENDOR_URL = "/static/vendor"
SWAGGER_UI = f"{VENDOR_URL}/swagger-ui-dist-5.35.0"
REDOC = f"{VENDOR_URL}/redoc-2.5.4"
FAVICON = f"{SWAGGER_UI}/favicon-32x32.png"
DOC_PATHS = frozenset({"/docs", "/redoc"})
"""The pages; with the assets under VENDOR_URL they need no token (see server/auth.py)."""


def install_docs(app: FastAPI) -> None:
    """Serve `/docs`, `/redoc` and their assets (the app is made with docs_url=None)."""
    app.mount(VENDOR_URL, StaticFiles(directory=VENDOR_DIR), name="vendor")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=FAVICON,
            swagger_ui_parameters={"validatorUrl": None},  # no badge from validator.swagger.io
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{REDOC}/redoc.standalone.js",
            redoc_favicon_url=FAVICON,
            with_google_fonts=False,
        )
