"""The sessions list: every session (`/sessions`) and one agent's (`/agents/{name}/sessions`).

Filters (kind, agent, status, text in the title) and pages of `PAGE_SIZE` are the query
parameters of `GET /api/sessions` (the page's "any kind" is its `kind=all`: the API lists
tickets' sessions when `kind` is left out), and the rows come from the same call the route makes
(reports.sessions.find_sessions), one more row asked for to know whether a next page
exists. The filter form is a plain GET form: it works without JavaScript.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import MAX_NAME
from opencrab.core.runtime import Runtime
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking
from opencrab.reports.sessions import SessionKind, SessionSummary, find_sessions

router = APIRouter()

PAGE_SIZE = 50
KINDS = ("chat", "discussion", "ticket")
KIND_FILTERS: dict[str, SessionKind | Literal["all"]] = {
    "": "all",
    "chat": "chat",
    "discussion": "discussion",
    "ticket": "ticket",
}
"""The page's kind filter ("": any kind) as `GET /api/sessions` takes it."""
STATUSES = ("active", "suspended", "completed", "failed")

KindFilter = Annotated[Literal["", "chat", "discussion", "ticket"], Query()]
StatusFilter = Annotated[Literal["", "active", "suspended", "completed", "failed"], Query()]
TextFilter = Annotated[str, Query(max_length=200)]
PageNumber = Annotated[int, Query(ge=1, le=1_000_000)]


@dataclass(frozen=True)
class Listed:
    """A session as a row of the list: the API's summary and the names it mentions."""

    session: SessionSummary
    agents: list[tuple[str, str]]  # (name, language) of its agent or participants
    language: str


@router.get("/sessions", response_class=HTMLResponse)
async def all_sessions(
    request: Request,
    kind: KindFilter = "",
    status: StatusFilter = "",
    agent: Annotated[str, Query(max_length=MAX_NAME)] = "",
    q: TextFilter = "",
    page: PageNumber = 1,
) -> HTMLResponse:
    """Every session, newest first, filtered."""
    runtime: Runtime = request.app.state.runtime
    filters = {"kind": kind, "status": status, "agent": agent.strip(), "q": q.strip()}
    listing = await run_blocking(_listing, runtime, filters, page, "/sessions")
    return render(request, "sessions.html", title="Sessions", **listing)


@router.get("/agents/{name}/sessions", response_class=HTMLResponse)
async def agent_sessions(
    agent: PageAgent,
    request: Request,
    kind: KindFilter = "",
    status: StatusFilter = "",
    q: TextFilter = "",
    page: PageNumber = 1,
) -> HTMLResponse:
    """One agent's sessions: its chats and the discussions it takes part in."""
    runtime: Runtime = request.app.state.runtime
    filters = {"kind": kind, "status": status, "agent": agent.id, "q": q.strip()}
    base = f"/agents/{quote(agent.name, safe='')}/sessions"
    listing = await run_blocking(_listing, runtime, filters, page, base, "agent")
    return render(
        request,
        "agent_sessions.html",
        title=f"{agent.name} · Sessions",
        agent=agent,
        tab="sessions",
        **listing,
    )


def _listing(
    runtime: Runtime, filters: dict[str, str], page: int, base: str, fixed: str = ""
) -> dict[str, Any]:
    """One page of the list; `fixed` names a filter the address itself sets."""
    found = find_sessions(
        runtime,
        agent=filters["agent"] or None,
        kind=KIND_FILTERS[filters["kind"]],
        status=filters["status"] or None,
        text=filters["q"] or None,
        limit=PAGE_SIZE + 1,
        offset=(page - 1) * PAGE_SIZE,
    )
    names = runtime.agents.names()
    default = runtime.settings.agent.language
    rows = []
    for summary in found[:PAGE_SIZE]:
        ids = [str(p) for p in summary.participant_ids] or (
            [str(summary.agent_id)] if summary.agent_id else []
        )
        agents = [names[i] for i in ids if i in names]
        rows.append(Listed(summary, agents, agents[0][1] if agents else default))
    shown = {k: v for k, v in filters.items() if k != fixed}
    return {
        "rows": rows,
        "filters": shown,
        "base": base,
        "page": page,
        "newer": page_link(base, shown, page - 1) if page > 1 else None,
        "older": page_link(base, shown, page + 1) if len(found) > PAGE_SIZE else None,
        "kinds": KINDS,
        "statuses": STATUSES,
        "agent_names": sorted(name for name, _ in names.values()),
    }


def page_link(base: str, filters: dict[str, str], page: int) -> str:
    """The list's address with its filters and page (empty filters left out)."""
    query = {k: v for k, v in filters.items() if v}
    if page > 1:
        query["page"] = str(page)
    return f"{base}?{urlencode(query)}" if query else base
