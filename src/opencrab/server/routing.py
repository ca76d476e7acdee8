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

A GET route whose endpoint is marked `answered_directly` (it takes only the request and
returns its own Response, the app's `check_route` its one dependency; `GET /api/agents`,
asked by every page) is answered by the index itself when asked without a query string:
it sets the scope FastAPI sets (route, endpoint, path parameters), runs `check_route`,
calls the endpoint and sends its Response. FastAPI would do the same, through a request
handler, dependency solving and exit stacks that cost more than the read of the agent
list. The index answers only where FastAPI would have taken that route; with a query
string (which `check_route` may refuse as unknown), a dependency override or FastAPI's
own telemetry on, FastAPI answers.

    index_routes(app)   # after FastAPI() is built; routes may be added later
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from fastapi import FastAPI
from fastapi.routing import (
    _FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY,
    APIRoute,
    APIRouter,
    APIWebSocketRoute,
    _get_fastapi_scope,
    _IncludedRouter,
    _update_scope,
)
from fastapi.telemetry._api import _route_selected
from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send

from opencrab.server.scopes import check_route

Endpoint = Callable[[Request], Awaitable[Response]]
_DIRECT: set[Callable[..., Any]] = set()


def answered_directly(endpoint: Endpoint) -> Endpoint:
    """Mark a GET route's endpoint that takes only the request and returns its own
    Response: asked without a query string, the index runs the app's dependency and the
    endpoint itself (module docstring). Put it under the route's decorator.

        @router.get("/agents", response_model=list[AgentSummary])
        @answered_directly
        async def list_agents(request: Request) -> Response: ...
    """
    _DIRECT.add(endpoint)
    return endpoint


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
        self.direct: dict[str, tuple[APIRoute, Any, Endpoint]] = {}  # GET path: route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = self.router
        if scope["type"] not in ("http", "websocket") or router.form_limits:
            await router.app(scope, receive, send)
            return
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and not scope.get("query_string")
            and scope.get("fastapi.telemetry") is None
            and not getattr(router.dependency_overrides_provider, "dependency_overrides", None)
        ):
            if sum(map(_VERSION, self.routers)) != self.version:
                self._build()
            direct = self.direct.get(get_route_path(scope))
            if direct is not None:
                await self._answer(direct, scope, receive, send)
                return
        found = self.first_full_match(scope)
        if found is None:
            await router.app(scope, receive, send)  # FastAPI's own: 404, 405, redirects
            return
        # what FastAPI's APIRouter.app does with its first full match
        route, child_scope = found
        if "router" not in scope:
            scope["router"] = router
        _update_scope(scope, child_scope)
        _route_selected(
            scope=scope, path=getattr(route, "path_format", None), mount=isinstance(route, Mount)
        )
        await route.handle(scope, receive, send)

    async def _answer(
        self, direct: tuple[APIRoute, Any, Endpoint], scope: Scope, receive: Receive, send: Send
    ) -> None:
        """What FastAPI does for a GET of a route `answered_directly`, without a query
        string: the scope it sets, the app's one dependency, the endpoint, its Response.
        An exception goes to the same exception handlers (the app's ExceptionMiddleware
        holds the ones FastAPI's route wrapper would use)."""
        route, context, endpoint = direct
        if "router" not in scope:
            scope["router"] = self.router
        scope["endpoint"] = route.endpoint
        scope["path_params"] = dict(scope.get("path_params", {}))
        _get_fastapi_scope(scope)[_FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY] = context
        scope["route"] = route
        _route_selected(scope=scope, path=context.path_format)
        request = Request(scope, receive, send)
        await check_route(request)
        response = await endpoint(request)
        await response(scope, receive, send)

    def first_full_match(self, scope: Scope) -> tuple[BaseRoute, Scope] | None:
        """The app's first route that matches `scope` fully, and its child scope: the one
        FastAPI would take; None when no route matches fully."""
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
            match, child_scope = candidate.route.matches(scope)
            if match is Match.FULL:
                return candidate.route, child_scope
        return None

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
        self.direct = self._direct_routes()

    def _direct_routes(self) -> dict[str, tuple[APIRoute, Any, Endpoint]]:
        """The GET routes `answered_directly` by path: each only where FastAPI would take
        it for a GET of its path, and only if the app's `check_route` is its one
        dependency and the request its one parameter."""
        found: dict[str, tuple[APIRoute, Any, Endpoint]] = {}
        for route in self.router.routes:
            if not isinstance(route, _IncludedRouter):
                continue
            for context in route.effective_route_contexts():
                api = context.original_route
                if not isinstance(api, APIRoute) or api.endpoint not in _DIRECT:
                    continue
                path = context.path_format
                dependant = context.dependant
                if dependant is None:
                    continue
                calls = [d.call for d in dependant.dependencies]
                if (
                    "{" in path
                    or set(api.methods or ()) != {"GET"}
                    or calls != [check_route]
                    or dependant.dependencies[0].dependencies
                    or dependant.path_params
                    or dependant.query_params
                    or dependant.header_params
                    or dependant.cookie_params
                    or dependant.body_params
                    or dependant.request_param_name is None
                    or dependant.background_tasks_param_name is not None
                    or dependant.response_param_name is not None
                ):
                    continue
                probe: Scope = {"type": "http", "method": "GET", "path": path, "root_path": ""}
                first = self.first_full_match(dict(probe))
                if first is None or first[0] is not route:
                    continue
                chosen = route._match(dict(probe))
                if chosen[0] is Match.FULL and chosen[2] is api:
                    found[path] = (api, context, api.endpoint)
        return found


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
