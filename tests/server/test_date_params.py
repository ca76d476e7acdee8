"""Every route that takes a day or a time in its query string answers boundary dates
without a 5xx, and a refused one is a 400 naming the parameter (issue 31, point 10:
`from=0001-01-01&to=9999-12-31` was a 500 on every LLM analytics route and `/costs`).

The routes are found in the app itself (its routes' query parameters, OpenAPI's and the
pages'), so a new route that takes dates is covered without being listed here."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any, get_args

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.fakes.metrics_rows import usage_rows
from tests.server.conftest import new_agent

DATE_NAMES = {"from", "to", "since", "until", "day", "date", "start", "end", "before", "after"}
"""Query parameters that name a day or a moment, whatever their type says."""
PAGES = ["/costs", "/analytics", "/budgets"]
"""Pages whose figures cover a period (asked with the same dates even when they take none)."""
BOUNDARY_DAYS = ["0001-01-01", "9999-12-31", "1969-12-31", "3000-01-01", "2026-02-30"]


def _dated(param: Any) -> bool:
    """True for a query parameter that takes a day or a time."""
    if param.alias in DATE_NAMES:
        return True
    kinds = {param.field_info.annotation, *get_args(param.field_info.annotation)}
    if kinds & {date, datetime}:
        return True
    patterns = [getattr(m, "pattern", None) for m in param.field_info.metadata]
    return any(p and "[0-9]{4}-" in p for p in patterns)


def _query_params(dependant: Dependant) -> list[Any]:
    """A route's query parameters, its dependencies' included."""
    found = list(dependant.query_params)
    for sub in dependant.dependencies:
        found += [p for p in _query_params(sub) if p not in found]
    return found


def dated_routes(client: TestClient) -> dict[str, list[str]]:
    """GET paths of the app -> the names of their query parameters that take dates."""
    found: dict[str, list[str]] = {}
    for context in iter_route_contexts(client.app.routes):  # type: ignore[attr-defined]
        route = context.original_route
        if not isinstance(route, APIRoute) or "GET" not in route.methods:
            continue
        names = [p.alias for p in _query_params(route.dependant) if _dated(p)]
        if names:
            found[context.path] = names
    return found


def _cases(names: list[str]) -> list[dict[str, str]]:
    """Boundary values of each date parameter alone, and of from/to together."""
    cases = [{name: day} for name in names for day in BOUNDARY_DAYS]
    if {"from", "to"} <= set(names):
        cases += [
            {"from": "0001-01-01", "to": "9999-12-31"},
            {"from": "2026-02-01", "to": "2026-01-01"},  # reversed
            {"from": "1970-01-01", "to": "2999-12-31"},  # the longest span
            {"from": "2026-01-01", "to": "2026-01-01"},
        ]
    return cases


@pytest.fixture
def stored(client: TestClient, db: Database) -> str:
    """An agent with model calls on record, so every figure has something to count."""
    agent = new_agent(client)
    with db.write() as conn:
        metrics_repo.insert(conn, usage_rows([agent["id"]], days=3, per_day=2))
    return str(agent["id"])


def test_the_routes_that_take_dates_are_found(client: TestClient) -> None:
    routes = dated_routes(client)
    assert routes["/api/analytics/llm/cost"] == ["from", "to"]
    assert routes["/costs"] == ["from", "to"]
    assert len([p for p, names in routes.items() if names == ["from", "to"]]) >= 11


def test_boundary_dates_are_a_400_naming_the_parameter_never_a_5xx(
    client: TestClient, stored: str
) -> None:
    routes = dated_routes(client)
    for page in PAGES:
        routes.setdefault(page, ["from", "to"])
    failures: list[str] = []
    for path, names in sorted(routes.items()):
        url = re.sub(r"\{[^}]+\}", stored, path)  # path parameters: the stored agent
        for params in _cases(names):
            try:
                answer = client.get(url, params=params)
            except Exception as exc:  # the in-process client raises what would be a 500
                failures.append(f"GET {url} {params}: {type(exc).__name__}: {exc}")
                continue
            said = f"GET {url} {params}: {answer.status_code} {answer.text[:200]}"
            if answer.status_code >= 500:
                failures.append(said)
            elif answer.status_code == 400:
                json_body = answer.headers["content-type"].startswith("application/json")
                message = answer.json()["message"] if json_body else answer.text  # a page
                if not any(re.search(rf"\b{re.escape(name)}\b", message) for name in params):
                    failures.append(said + " (the 400 names no parameter)")
            elif answer.status_code != 200 and not (answer.status_code == 404 and url != path):
                failures.append(said)  # (a path naming the agent may name no such thing)
    assert failures == []


def test_a_day_out_of_range_says_which_and_what_is_allowed(client: TestClient) -> None:
    answer = client.get(
        "/api/analytics/llm/totals", params={"from": "2026-01-01", "to": "9999-12-31"}
    )
    assert answer.status_code == 400
    assert answer.json()["message"] == (
        "to: 9999-12-31 is out of range (a day from 1970-01-01 to 2999-12-31)"
    )
    reversed_ = client.get("/costs", params={"from": "2026-02-01", "to": "2026-01-01"})
    assert reversed_.status_code == 400
    ok = client.get("/api/analytics/llm/totals", params={"from": "1970-01-01", "to": "2999-12-31"})
    assert ok.status_code == 200, ok.text
