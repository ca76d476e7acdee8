"""A configuration error while the app starts is reported as its message alone.

uvicorn runs the app's lifespan (the runtime, the gateways) after `opencrab up` has
printed its banner; an exception there is logged with its traceback followed by
"Application startup failed. Exiting." and uvicorn exits with 3. For a ConfigError, a
mistake the user fixes in their settings, `StartupErrors` keeps the error, drops the
traceback and uvicorn's closing line, and `up` reports the message and exits 2 as for
any other configuration error. Other exceptions keep uvicorn's report.

Example:
    guarded = StartupErrors(app)
    try:
        uvicorn.Server(uvicorn.Config(guarded, ...)).run()
    except SystemExit:
        guarded.raise_config_error()
        raise
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opencrab.errors import ConfigError

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

FAILED_LINE = "Application startup failed. Exiting."
"""What uvicorn logs (logger uvicorn.error) when the lifespan's start-up failed."""


class StartupErrors:
    """The ASGI app `app`, keeping a ConfigError its start-up raised (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.error: ConfigError | None = None
        logging.getLogger("uvicorn.error").addFilter(self._quiet)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def report(message: Message) -> None:
            # Starlette sends the failure from inside its `except` block: the error in hand
            error = sys.exc_info()[1]
            if message.get("type") == "lifespan.startup.failed" and isinstance(error, ConfigError):
                self.error = error
                message = {"type": "lifespan.startup.failed", "message": ""}
            await send(message)

        await self.app(scope, receive, report)

    def _quiet(self, record: logging.LogRecord) -> bool:
        return not (self.error is not None and record.getMessage() == FAILED_LINE)

    def raise_config_error(self) -> None:
        """Raise the ConfigError the start-up failed with, if it did."""
        logging.getLogger("uvicorn.error").removeFilter(self._quiet)
        if self.error is not None:
            raise self.error
