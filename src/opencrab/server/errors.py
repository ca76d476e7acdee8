"""Map every failure to `{"error": CODE, "message": TEXT}` with the right status.

Request validation errors (a missing field, a wrong type, an unknown field or query
parameter, a body that is not JSON) are 400 `validation_error`, as seed 002's OpenAPI
documents; `document_validation_errors` makes the served OpenAPI say so.

Under `/v1` (the OpenAI-compatible endpoint) the same errors take OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}`, so OpenAI's clients show the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import HTTPConnection

from opencrab.errors import (
    BudgetExceeded,
    ConfigError,
    ConflictError,
    ForbiddenError,
    LlmError,
    NotFoundError,
    OpenCrabError,
    QuotaExceeded,
    SkillFileError,
    TurnTimeout,
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
    429: "rate_limited",
}


ERROR_STATUS: dict[type[OpenCrabError], int] = {
    NotFoundError: 404,
    ForbiddenError: 403,
    QuotaExceeded: 413,  # before ValidationError, its base class
    ValidationError: 400,
    ConflictError: 409,
    BudgetExceeded: 429,  # before LlmError: the most specific class comes first
    LlmError: 502,
    TurnTimeout: 504,  # a model call cut off by [agent] turn_timeout_secs
}
"""The status of each of our errors a client can cause or should retry."""


async def refuse_unknown_query(request: HTTPConnection) -> None:
    """A query parameter the route does not take is refused (400), like an unknown body
    field: `?limt=5` is a typo to report, not to ignore."""
    if request.scope["type"] != "http":
        return  # a WebSocket's ?access_token= is read by the auth middleware
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.query_params:
        return
    known = {p.alias for p in _query_params(dependant)}
    unknown = sorted({k for k in request.query_params if k not in known})
    if unknown:
        raise RequestValidationError(
            [
                {"loc": ("query", name), "msg": "unknown query parameter", "type": "extra"}
                for name in unknown
            ]
        )


MAX_JSON_DEPTH = 64
"""How deeply a request body's JSON may nest (what it stores must serialise back)."""


async def refuse_unreadable_json(request: HTTPConnection) -> None:
    """A JSON body that is no strict JSON (a lone surrogate such as "\\ud800", NaN) or
    nests deeper than MAX_JSON_DEPTH is refused (400) before the route runs: Python's
    parser lets them through, and what was stored could then never be read back (500s)
    or sent to a model. The WebSocket reads its messages the same strict way."""
    if request.scope["type"] != "http" or request.scope["method"] not in ("POST", "PUT", "PATCH"):
        return
    if "json" not in request.headers.get("content-type", ""):
        return
    assert isinstance(request, Request)
    body = await request.body()  # read already by the route's body parsing (cached)
    if not body:
        return
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _body_error(f"not valid JSON: {exc}") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise _body_error(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _body_error(message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body",), "msg": message, "type": "json_invalid"}])


def _json_problem(err: dict[str, Any], doc: str) -> str:
    """FastAPI's "JSON decode error" at a character offset, said with its line and column
    (as the strict check says it)."""
    loc = err.get("loc", ())
    at = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
    line = doc.count("\n", 0, at) + 1
    column = at - (doc.rfind("\n", 0, at) + 1) + 1
    why = str((err.get("ctx") or {}).get("error") or "JSON decode error")
    return f"not valid JSON: {why[:1].lower()}{why[1:]}: line {line} column {column} (char {at})"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects in `value` nest more than `limit` deep."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def _query_params(dependant: Any) -> list[Any]:
    found = list(dependant.query_params)
    for sub in dependant.dependencies:
        found += _query_params(sub)
    return found


def error_body(code: str, message: str, *, line: int | None = None) -> dict[str, Any]:
    """Our error shape; `line` is added for an error in submitted text (a skill file)."""
    body: dict[str, Any] = {"error": code, "message": message}
    if line is not None:
        body["line"] = line
    return body


OPENAI_PREFIX = "/v1"
OPENAI_TYPES = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
"""OpenAI's error `type` by status; other 4xx are invalid_request_error, 5xx api_error."""


def is_openai_path(path: str) -> bool:
    """Whether `path` belongs to the OpenAI-compatible endpoint (its errors: OpenAI's shape)."""
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def openai_error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, dict[str, str | None]]:
    """OpenAI's error object: `{"error": {"message", "type", "param", "code"}}`."""
    kind = OPENAI_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    request: HTTPConnection,
    status: int,
    code: str,
    message: str,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
    line: int | None = None,
) -> Response:
    """An error in the shape of the route asked: ours, OpenAI's under `/v1`, or a page.

    A dashboard that is installed puts its `ErrorPages` in `app.state.error_pages`; a
    request for one of its pages then gets an HTML page with a way back, not JSON.
    """
    app = request.scope.get("app")
    pages: ErrorPages | None = getattr(app.state, "error_pages", None) if app else None
    if pages is not None and pages.is_page(request.url.path):
        return pages.render(request, status, message, headers)
    if is_openai_path(request.url.path):
        body: dict[str, Any] = openai_error_body(status, message, param=param, code=code)
    else:
        body = error_body(code, message, line=line)
    return JSONResponse(body, status_code=status, headers=headers)


class ErrorPages(Protocol):
    """How a web UI shows an error on one of its own pages (see `error_response`)."""

    def is_page(self, path: str) -> bool: ...

    def render(
        self,
        request: HTTPConnection,
        status: int,
        message: str,
        headers: Mapping[str, str] | None,
    ) -> Response: ...


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error response the same shape."""

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = STATUS_CODES.get(exc.status_code, "error")
        return error_response(request, exc.status_code, code, str(exc.detail), headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        parts, fields = [], []
        for err in exc.errors():
            if err.get("type") == "json_invalid" and isinstance(exc.body, str):
                parts.append(f"body: {_json_problem(err, exc.body)}")
                fields.append("")
                continue
            loc = [str(p) for p in err.get("loc", ())]
            parts.append(f"{'.'.join(loc)}: {err.get('msg', 'invalid')}")
            fields.append(".".join(loc[1:] if loc[:1] in (["body"], ["query"]) else loc))
        param = fields[0] if fields and fields[0] else None
        return error_response(request, 400, "validation_error", "; ".join(parts), param=param)

    async def _known(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OpenCrabError)
        status = next(s for cls, s in ERROR_STATUS.items() if isinstance(exc, cls))
        line = exc.line if isinstance(exc, SkillFileError) else None
        return error_response(request, status, exc.code, str(exc), line=line)

    for error in ERROR_STATUS:
        app.add_exception_handler(error, _known)  # Starlette picks the closest class

    @app.exception_handler(ConfigError)
    @app.exception_handler(OpenCrabError)
    async def _ours(request: Request, exc: OpenCrabError) -> Response:
        log.error("request failed: %s", exc)
        return error_response(request, 500, exc.code, str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return error_response(request, 500, "internal_error", "internal server error")


VALIDATION_ERROR_400 = {
    "description": "Invalid request (a missing or wrong field, parameter or body)",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}


BODY_TOO_LARGE = "The request body is over `[gateway.rest] max_body_kb`"


def document_validation_errors(app: FastAPI) -> None:
    """Make the OpenAPI document say 400 with ErrorResponse where FastAPI would say 422.

    Every operation that takes parameters or a body documents 400 (unless it documents
    its own 400, as `/v1` does with OpenAI's error shape), and one that takes a body 413
    in the same shape (a body over the limit); FastAPI's 422 entries and its
    HTTPValidationError schemas are removed, since the server never answers 422.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                if operation.get("parameters") or operation.get("requestBody"):
                    responses.setdefault("400", VALIDATION_ERROR_400)
                if operation.get("requestBody"):  # opencrab.server.limits, in the 400's shape
                    shape = responses["400"].get("content", VALIDATION_ERROR_400["content"])
                    responses.setdefault("413", {"description": BODY_TOO_LARGE, "content": shape})
        schemas = schema.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
