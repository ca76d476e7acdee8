"""The A2A server (opencrab.a2a.server) mounted in the HTTP app, on the REST API's port.

Its routes sit inside the app's middleware, so they have what every route has: the Host
check and the cross-site guard (opencrab.server.guard), the bearer check when tokens are
required (opencrab.server.auth: the Agent Cards are open, `is_card_path`) and the body
limits (opencrab.server.limits). Each operation checks the token's scope itself.
Mounted when `[a2a]` is on (opencrab.config.a2a: by default when the REST gateway binds a
loopback address) and the `a2a` extra is installed; without the extra, turning it on
explicitly logs what to install.

Example:
    serving = mount_a2a(app, settings)
    async with serving(runtime):
        ...  # serve
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from opencrab.config import Settings
from opencrab.core.runtime import Runtime

log = logging.getLogger(__name__)

Serving = Callable[[Runtime], AbstractAsyncContextManager[None]]


@asynccontextmanager
async def _nothing(runtime: Runtime) -> AsyncIterator[None]:
    yield


def mount_a2a(app: FastAPI, settings: Settings) -> Serving:
    """Add the A2A routes to `app` when `[a2a]` is on; what the lifespan serves them with."""
    config = settings.a2a
    if not config.serves(settings.gateway.rest.host):
        return _nothing
    try:
        from opencrab.a2a.server import A2aEndpoint
    except ImportError as error:
        if config.enabled:
            log.warning(
                "[a2a] enabled = true, but the A2A SDK is not installed (%s): "
                "pip install 'opencrab[a2a]'",
                error,
            )
        return _nothing
    endpoint = A2aEndpoint(config)
    app.router.routes.extend(endpoint.routes())
    app.state.a2a = endpoint
    return endpoint.serving
