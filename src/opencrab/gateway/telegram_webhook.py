"""POST /hooks/telegram: the updates Telegram sends a bot in webhook mode.

/hooks/ carries no bearer token of ours (server/auth.py): Telegram proves itself with the
secret given to setWebhook, sent back in `X-Telegram-Bot-Api-Secret-Token`. The secret is
compared (in constant time) before the body is read; a wrong or missing one is 401. The
update goes to the running Telegram gateway (gateway/telegram.py), which answers it in
the background, so Telegram gets its 200 at once. No Telegram gateway running in webhook
mode here: 404. This module imports no Telegram SDK: it is loaded with every server.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from opencrab.plugins import hookimpl

router = APIRouter(tags=["Chat platforms"])

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (a header's name)


# /hooks/ needs no token (server/auth.py); declared as a plugin's route declares its scope
# (server/scopes.py), "read": a token sent along, of any scope, changes nothing here
@router.post("/hooks/telegram", include_in_schema=False, openapi_extra={"x-scope": "read"})
async def telegram_update(request: Request) -> JSONResponse:
    """Hand one update to the Telegram gateway, once its secret matches."""
    runtime = getattr(request.app.state, "runtime", None)
    gateway: Any = runtime.outlets.get("telegram") if runtime is not None else None
    expected = gateway.webhook_secret() if hasattr(gateway, "webhook_secret") else None
    if gateway is None or expected is None:
        raise HTTPException(404, "no Telegram gateway in webhook mode runs here")
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, "the Telegram secret token does not match")
    try:
        update = json.loads(await request.body())
    except ValueError:
        raise HTTPException(400, "the body is not JSON") from None
    if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
        raise HTTPException(400, "the body is not a Telegram update (no update_id)")
    try:
        await gateway.feed(update)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    return JSONResponse({"ok": True})


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
