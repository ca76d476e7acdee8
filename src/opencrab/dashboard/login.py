"""Signing in to the dashboard with a token, and out again.

When the server requires tokens (off loopback, as root, or `[gateway.rest]
require_token`), a page asked for without one redirects to `/login`
(opencrab.server.auth.BearerAuth).
The form takes a token from `opencrab token create NAME`; a valid one is exchanged for a
sign-in (opencrab.auth.TokenStore.sign_in) whose id, never the token, is kept in an
HttpOnly, SameSite=Strict cookie that the API accepts in place of the Authorization
header, so the pages' own requests and WebSockets carry it, with the token's scope.
Signing out ends the sign-in on the server, so the old cookie stops working at once
(open WebSockets are closed); so does revoking the token, and a sign-in ends by itself
after `LOGIN_DAYS`. Without required tokens both pages just lead home.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from opencrab.auth import LOGIN_DAYS, TokenStore
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.server.auth import SESSION_COOKIE

LOGIN_PATH = "/login"
LOGOUT_PATH = "/logout"
OPEN_PAGES = frozenset({LOGIN_PATH, LOGOUT_PATH})
MAX_FORM_BYTES = 16 * 1024

router = APIRouter()


def safe_next(target: str | None) -> str:
    """Only a path on this server: never `//host`, a scheme or a backslash trick."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    if any(ch in target for ch in "\\\r\n\t"):
        return "/"
    return target


@router.get(LOGIN_PATH, response_class=HTMLResponse)
async def login_page(request: Request, next: str | None = None) -> Response:
    """The sign-in form (home when the server needs no token)."""
    if not request.app.state.auth_required:
        return RedirectResponse(safe_next(next), status_code=303)
    return render(request, "login.html", title="Sign in", next=safe_next(next), error=None)


@router.post(LOGIN_PATH, response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the token; a good one is exchanged for a sign-in, set as the cookie."""
    if not request.app.state.auth_required:
        return RedirectResponse("/", status_code=303)
    body = await request.body()
    form = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    secret = (form.get("token") or [""])[0].strip()
    target = safe_next((form.get("next") or ["/"])[0])
    tokens = TokenStore(request.app.state.db)
    token = await run_blocking(tokens.verify, secret) if secret else None
    if token is None:
        error = (
            "That token is not valid (revoked, mistyped or never created)."
            if secret
            else "Enter a token."
        )
        return render(request, "login.html", title="Sign in", next=target, error=error, status=401)
    earlier = request.cookies.get(SESSION_COOKIE)
    if earlier:  # signing in again ends the sign-in this browser had
        await run_blocking(tokens.sign_out, earlier)
    login_secret = await run_blocking(tokens.sign_in, token)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        login_secret,
        max_age=LOGIN_DAYS * 86400,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post(LOGOUT_PATH)
async def logout(request: Request) -> Response:
    """End the cookie's sign-in on the server and forget the cookie; back to the form."""
    target = LOGIN_PATH if request.app.state.auth_required else "/"
    login_secret = request.cookies.get(SESSION_COOKIE)
    if login_secret and request.app.state.auth_required:
        await run_blocking(TokenStore(request.app.state.db).sign_out, login_secret)
    response = RedirectResponse(target, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
