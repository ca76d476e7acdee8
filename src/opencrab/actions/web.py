"""Seed 002's http_request and fetch_webpage: off unless switched on for the agent.

Both go through opencrab.actions.http_client: only public addresses (checked at every
connection and redirect, `[tools] http_allow_networks` excepted), a time cap, a body cap
and a redirect limit. fetch_webpage GETs a page and returns its readable text
(opencrab.actions.html_text); http_request sends any method and returns the raw body as
text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.html_text import page_text
from opencrab.actions.http_client import fetch
from opencrab.actions.tool_settings import require_enabled
from opencrab.actions.workspace import object_schema
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_TEXT_CHARS = 100_000  # of a page's text, to the model
SHOWN_HEADERS = ("content-type", "content-length", "last-modified", "etag", "location")
TEXTUAL = ("text/", "application/json", "application/xml", "application/xhtml+xml")
URL = {"type": "string", "minLength": 1, "maxLength": 4096, "description": "http(s) URL."}


class HttpRequest(Action):
    name = "http_request"
    description = (
        "Send an HTTP request to a public http(s) URL and get the status, main headers and "
        "body (capped). Only for agents an operator switched it on for."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["url"],
        url=URL,
        method={
            "type": "string",
            "pattern": "^[A-Za-z]{1,10}$",
            "default": "GET",
            "description": "GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS.",
        },
        headers={
            "type": "object",
            "maxProperties": 32,
            "additionalProperties": {"type": "string", "maxLength": 8192},
            "propertyNames": {"pattern": "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$"},
        },
        body={"type": "string", "maxLength": 1_000_000, "description": "Sent as UTF-8."},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await require_enabled(ctx, "http_request")
        method = args.get("method", "GET").upper()
        if method not in METHODS:
            return ActionResult.fail(f"method {method!r} is not one of {', '.join(METHODS)}")
        body = args.get("body")
        reply = await fetch(
            ctx.settings.tools,
            method,
            args["url"],
            headers=args.get("headers"),
            body=None if body is None else body.encode("utf-8"),
        )
        textual = reply.content_type.startswith(TEXTUAL) or not reply.content_type
        return ActionResult.ok(
            {
                "url": reply.url,
                "status": reply.status,
                "headers": {k: v for k, v in reply.headers.items() if k in SHOWN_HEADERS},
                "body": reply.text() if textual else None,
                "body_omitted": None if textual else f"binary content ({reply.content_type})",
                "bytes": len(reply.body),
                "truncated": reply.truncated,
                "redirects": reply.redirects,
            }
        )


class FetchWebpage(Action):
    name = "fetch_webpage"
    description = (
        "Fetch a public web page and get its title and readable text (scripts and markup "
        "removed). Only for agents an operator switched it on for."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(["url"], url=URL)

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await require_enabled(ctx, "fetch_webpage")
        reply = await fetch(ctx.settings.tools, "GET", args["url"])
        if reply.status >= 400:
            return ActionResult.fail(f"{reply.url} answered HTTP {reply.status}")
        kind = reply.content_type
        if kind in ("text/html", "application/xhtml+xml") or not kind:
            page = await run_blocking(page_text, reply.text())
            title, text = page.title, page.text
        elif kind.startswith(TEXTUAL):
            title, text = "", reply.text()
        else:
            return ActionResult.fail(
                f"{reply.url} is {kind}, not a web page; fetch_webpage reads HTML and text"
            )
        return ActionResult.ok(
            {
                "url": reply.url,
                "status": reply.status,
                "title": title,
                "text": text[:MAX_TEXT_CHARS],
                "truncated": reply.truncated or len(text) > MAX_TEXT_CHARS,
                "redirects": reply.redirects,
            }
        )


@hookimpl
def register_actions(register: Any) -> None:
    for action in (HttpRequest(), FetchWebpage()):
        register(action)
