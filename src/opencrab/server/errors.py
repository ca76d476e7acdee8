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

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=404)

    @app.exception_handler(ValidationError)
    async def _bad(_: Request, exc: ValidationError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=400)

    @app.exception_handler(ConflictError)
    async def _conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=409)

    @app.exception_handler(BudgetExceeded)
    async def _budget(_: Request, exc: BudgetExceeded) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=429)

    @app.exception_handler(LlmError)
    async def _upstream(_: Request, exc: LlmError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=502)

    @app.exception_handler(ConfigError)
    @app.exception_handler(OpenCrabError)
    async def _ours(_: Request, exc: OpenCrabError) -> JSONResponse:
        log.error("request failed: %s", exc)
        return JSONResponse(error_body(exc.code, str(exc)), status_code=500)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)
