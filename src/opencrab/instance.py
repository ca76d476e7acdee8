"""This process's OpenCrab instance mark, so OpenCrab never mistakes itself for a model.

The server sets `X-OpenCrab-Instance: <id>` on every HTTP response (errors and streams
included) and refuses, with 508, a request that carries its own id. Providers send the
id with every request and refuse any server that answers with a mark: seed 001 puts
both the REST gateway and the llama.cpp provider on localhost:8080, and a provider
pointed at OpenCrab's `/v1` would run a second agent inside every call.

The id is random per process: a mark equal to `INSTANCE_ID` is this very server; any
other mark is another OpenCrab server (an agent, not a model), refused just the same.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import httpx

from opencrab.errors import SelfCallRefused

INSTANCE_HEADER = "X-OpenCrab-Instance"
INSTANCE_ID = secrets.token_hex(8)
"""This process's mark: random, so two OpenCrab processes never share one."""


def server_root(url: httpx.URL) -> str:
    """The scheme, host and port of `url` (what a user writes as base_url)."""
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def event_hooks(
    provider: str, on_refused: Callable[[str], None]
) -> dict[str, list[Callable[..., Any]]]:
    """httpx event hooks: send this process's mark, refuse a server that answers with one.

    `on_refused` gets the reason first (so a health check can tell it), then the
    response hook raises SelfCallRefused.
    """

    async def send_mark(request: httpx.Request) -> None:
        request.headers[INSTANCE_HEADER] = INSTANCE_ID

    async def check_mark(response: httpx.Response) -> None:
        mark = response.headers.get(INSTANCE_HEADER)
        if mark:
            error = SelfCallRefused(
                provider, server_root(response.request.url), mark, own=mark == INSTANCE_ID
            )
            on_refused(str(error))
            raise error

    return {"request": [send_mark], "response": [check_mark]}
