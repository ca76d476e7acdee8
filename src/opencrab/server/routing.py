"""Route dispatch without trying every route: an index of the app's routes by path.

FastAPI tries the app's routes in order and takes the first that matches fully; each
included router (one per resource, some sixty of them) is tried by matching each of its
routes in turn, through several layers of bookkeeping. `GET /api/agents` was the
58th route tried: most of a request's time went to routes that could never match.

`RouteIndex` sits where the app's router dispatches (`Router.middleware_stack`). It
knows every route's path templates and the literal text each must start with (all of
the template up to its first `{`; the whole template when it has no parameter): a
request is matched only against the routes that could match its path, in the app's
order, and the first full match is handled exactly as FastAPI handles it. A route is
left out only when its path cannot match, so the first full match among the rest is
FastAPI's first full match. When none of them matches fully (a 404, a 405, a slash to
redirect, a low-priority route), or the app has form limits, the request goes to
FastAPI's own dispatch, which tries every route as before: behaviour, errors and the
OpenAPI document are FastAPI's. Routes whose paths the index cannot read (a mount, a
host, any other kind) are tried for every path. The index is rebuilt when a route is added to
the app or to any router included in it (FastAPI's routes versions).

    index_routes(app)   # after FastAPI() is built; routes may be added later
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from fastapi import FastAPI
from fastapi.routing import (
    APIRoute,
    APIRouter,
    APIWebSocketRoute,
    _IncludedRouter,
    _update_scope,
)
from fastapi.telemetry._api import _route_selected
from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Mount, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send

_Key = tuple[str, str | None] | None
"""A path's first two segments; (first, None): any second one; None: any path."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A route of the app and the paths it could match: equal to one of `exact`, or
    starting with one of `starts` (`("",)`: any path, for a route whose paths are
    unknown)."""

    route: BaseRoute
    exact: frozenset[str]
    starts: tuple[str, ...]


_VERSION = attrgetter("_routes_version")


class RouteIndex:
    """The app router's dispatch: only the routes that could match (module docstring)."""

    def __init__(self, router: APIRouter) -> None:
        self.router = router
        self.version: int | None = None
        self.routers: tuple[APIRouter, ...] = ()  # the app's and every included one
        self.by_two: dict[_Key, tuple[_Candidate, ...]] = {}
        self.by_one: dict[str, tuple[_Candidate, ...]] = {}
        self.anywhere: tuple[_Candidate, ...] = ()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = self.router
        if scope["type"] not in ("http", "websocket") or router.form_limits:
            await router.app(scope, receive, send)
            return
        if sum(map(_VERSION, self.routers)) != self.version:
            self._build()
        path = get_route_path(scope)
        parts = path.split("/", 3)
        first = parts[1] if len(parts) > 1 else ""
        found = self.by_two.get((first, parts[2])) if len(parts) > 2 else None
        if found is None:
            found = self.by_one.get(first, self.anywhere)
        for candidate in found:
            if path not in candidate.exact and not path.startswith(candidate.starts):
                continue
            route = candidate.route
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                # what FastAPI's APIRouter.app does with its first full match
                if "router" not in scope:
                    scope["router"] = router
                _update_scope(scope, child_scope)
                _route_selected(
                    scope=scope,
                    path=getattr(route, "path_format", None),
                    mount=isinstance(route, Mount),
                )
                await route.handle(scope, receive, send)
                return
        await router.app(scope, receive, send)

    def _build(self) -> None:
        routers = _routers_under(self.router)
        version = sum(map(_VERSION, routers))
        keyed: list[tuple[_Candidate, set[_Key]]] = []
        for route in self.router.routes:
            templates = _templates(route)
            if templates is None:
                keyed.append((_Candidate(route, frozenset(), ("",)), {None}))
                continue
            exact = frozenset(t for t in templates if "{" not in t)
            starts = tuple(sorted({t[: t.index("{")] for t in templates if "{" in t}))
            keys = {_key_of(t) for t in templates}
            keyed.append((_Candidate(route, exact, starts), keys))

        def among(*wanted: _Key) -> tuple[_Candidate, ...]:
            return tuple(c for c, keys in keyed if not keys.isdisjoint((*wanted, None)))

        known = {key for _, keys in keyed for key in keys if key is not None}
        self.by_two = {key: among(key, (key[0], None)) for key in known if key[1] is not None}
        self.by_one = {first: among((first, None)) for first, _ in known}
        self.anywhere = among()
        self.routers, self.version = routers, version


def _routers_under(router: APIRouter) -> tuple[APIRouter, ...]:
    """`router` and every router included in it, at any depth, each once: the sum of
    their routes versions changes whenever a route is added to any of them (versions
    only grow)."""
    found: dict[int, APIRouter] = {}
    waiting = [router]
    while waiting:
        current = waiting.pop()
        if id(current) in found:
            continue
        found[id(current)] = current
        waiting.extend(r.original_router for r in current.routes if isinstance(r, _IncludedRouter))
    return tuple(found.values())


def _templates(route: BaseRoute) -> list[str] | None:
    """The path templates `route` matches (None when they cannot be read)."""
    if isinstance(route, _IncludedRouter):
        found: list[str] = []
        for context in route.effective_route_contexts():
            inner = context.starlette_route or context.original_route
            if isinstance(context.original_route, APIRoute):
                path = context.path_format
            elif isinstance(inner, (Route, WebSocketRoute, APIWebSocketRoute)):
                path = inner.path
            else:
                return None
            if not isinstance(path, str) or not path.startswith("/"):
                return None
            found.append(path)
        return found
    if isinstance(route, (Route, WebSocketRoute)) and route.path.startswith("/"):
        return [route.path]  # APIRoute and APIWebSocketRoute are among them
    if isinstance(route, Mount) and route.path.startswith("/"):
        return [route.path_format]  # its path, then /{path}
    return None


def _key_of(template: str) -> _Key:
    """The first two segments every path of `template` has (see `_Key`)."""
    literal = template.split("{", 1)[0]
    segments = literal.split("/")[1:]
    if "{" in template:
        segments = segments[:-1]  # the last one is cut by the parameter: not complete
    if len(segments) >= 2:
        return segments[0], segments[1]
    if len(segments) == 1:
        return segments[0], None
    return None


def index_routes(app: FastAPI) -> None:
    """Dispatch `app`'s requests through a RouteIndex (module docstring); a router with
    middleware of its own (FastAPI's `max_body_size`) is left as it is."""
    if app.router.middleware_stack == app.router.app:
        app.router.middleware_stack = RouteIndex(app.router)
