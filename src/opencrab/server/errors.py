"""Map every failure to `{"error": CODE, "message": TEXT}` with the right status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from opencrab.errors import (
    BudgetExceeded,
    ConfigError,
    ConflictError,
    LlmError,
    NotFoundError,
    OpenCrabError,
    QuotaExceeded,
    ValidationError,
)

log = logging.getLogger(__name__)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
}


ERROR_STATUS: dict[type[OpenCrabError], int] = {
    NotFoundError: 404,
    QuotaExceeded: 413,  # before ValidationError, its base class
    ValidationError: 400,
    ConflictError: 409,
    BudgetExceeded: 429,  # before LlmError: the most specific class comes first
    LlmError: 502,
}
"""The status of each of our errors a client can cause or should retry."""


def error_body(code: str, message: str) -> dict[str, str]:
    return {"error": code, "message": message}


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error response the same shape."""

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()))
            parts.append(f"{where}: {err.get('msg', 'invalid')}")
        return JSONResponse(error_body("validation_error", "; ".join(parts)), status_code=422)

    async def _known(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OpenCrabError)
        status = next(s for cls, s in ERROR_STATUS.items() if isinstance(exc, cls))
        return JSONResponse(error_body(exc.code, str(exc)), status_code=status)

    for error in ERROR_STATUS:
        app.add_exception_handler(error, _known)  # Starlette picks the closest class

    @app.exception_handler(ConfigError)
    @app.exception_handler(OpenCrabError)
    async def _ours(_: Request, exc: OpenCrabError) -> JSONResponse:
        log.error("request failed: %s", exc)
        return JSONResponse(error_body(exc.code, str(exc)), status_code=500)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)
