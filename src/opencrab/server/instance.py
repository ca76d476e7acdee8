"""The instance mark on every response (see opencrab.instance), as the outermost ASGI layer."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opencrab.instance import INSTANCE_HEADER, INSTANCE_ID

_MARK = (INSTANCE_HEADER.lower().encode(), INSTANCE_ID.encode())
SELF_CALL_MESSAGE = (
    "this request came from this OpenCrab server itself (a provider's base_url points "
    "here); set that provider's [llm.providers.<name>] base_url to a model server"
)


class InstanceMark:
    """Mark every HTTP response with this process's instance id; answer a request that
    carries it (OpenCrab calling itself) with 508 before anything runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _MARK in scope["headers"]:
            refused = JSONResponse(
                {"error": "self_call", "message": SELF_CALL_MESSAGE},
                status_code=508,
                headers={INSTANCE_HEADER: INSTANCE_ID},
            )
            await refused(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[INSTANCE_HEADER] = INSTANCE_ID
            await send(message)

        await self.app(scope, receive, marked)


class MarkedFastAPI(FastAPI):
    """FastAPI whose whole middleware stack, error pages included, sits inside InstanceMark."""

    def build_middleware_stack(self) -> ASGIApp:
        return InstanceMark(super().build_middleware_stack())
