"""Imported transcripts: the list (`/transcripts`) and one session (`/transcripts/{id}`).

The list's filters (day, project, model, a minimum cost), its order (newest or by
cost) and pages are `GET /api/imports/sessions`'s,
its search box is `GET /api/imports/search`'s and its cost table
`GET /api/imports/costs`'s, each read through the same service function the route
calls; `static/js/transcripts.js` draws the cost chart from that endpoint and sends the
import form to `POST /api/imports`, following the job until it is done. A session page
renders its NormalizedMessages (`GET /api/imports/sessions/{id}/messages`) as
`transcript_view` groups them, `MESSAGES_PER_PAGE` at a time.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.dashboard.render import render
from opencrab.dashboard.transcript_view import build_items
from opencrab.errors import ValidationError
from opencrab.importers.search import search
from opencrab.importers.sessions import (
    import_cost_by_day,
    import_facets,
    import_sessions_page,
    normalized_messages,
    session_problems,
)
from opencrab.offload import run_blocking
from opencrab.reports.transcripts import DAY_PATTERN, SessionOrder
from opencrab.store import Database

router = APIRouter()

PAGE_SIZE = 50
SEARCH_HITS = 50
MESSAGES_PER_PAGE = 400
PageNumber = Annotated[int, Query(ge=1, le=1_000_000)]
COST_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)?$"
"""A minimum cost in USD as the form sends it (empty: none)."""
ORDERS = (
    ("newest", "Newest first"),
    ("cost_desc", "Cost, high to low"),
    ("cost_asc", "Cost, low to high"),
)


@router.get("/transcripts", response_class=HTMLResponse)
async def transcripts_page(
    request: Request,
    day: Annotated[str, Query(max_length=10)] = "",
    project: Annotated[str, Query(max_length=4096)] = "",
    model: Annotated[str, Query(max_length=200)] = "",
    q: Annotated[str, Query(max_length=500)] = "",
    sort: SessionOrder = "newest",
    min_cost: Annotated[str, Query(alias="minCost", max_length=20, pattern=COST_PATTERN)] = "",
    page: PageNumber = 1,
) -> HTMLResponse:
    """Imported sessions filtered by day, project, model and cost, newest or costliest
    first; a search; costs by day."""
    db: Database = request.app.state.runtime.db
    filters = {
        "day": day.strip(),
        "project": project,
        "model": model,
        "minCost": min_cost,
    }
    view = await run_blocking(_listing, db, filters, sort, q.strip(), page)
    return render(request, "transcripts.html", title="Transcripts", **view)


def _listing(db: Database, filters: dict[str, str], sort: str, q: str, page: int) -> dict[str, Any]:
    day = filters["day"] if re.fullmatch(DAY_PATTERN, filters["day"]) else None
    rows, total = import_sessions_page(
        db,
        day=day,
        project=filters["project"] or None,
        model=filters["model"] or None,
        min_cost=float(filters["minCost"]) if filters["minCost"] else None,
        sort=sort,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
    )
    costs = import_cost_by_day(db)
    models = sorted({c.model for c in costs})
    days = sorted({c.day for c in costs}, reverse=True)
    by_day = {d: {c.model: c.cost_usd for c in costs if c.day == d} for d in days}
    kept = {k: v for k, v in filters.items() if v} | ({} if sort == "newest" else {"sort": sort})
    hits, search_error = None, None
    if q:
        try:
            hits = search(db, q, limit=SEARCH_HITS)
        except ValidationError as exc:
            search_error = str(exc)

    def link(number: int) -> str:
        return "/transcripts?" + urlencode({**kept, "page": number})

    return {
        "rows": rows,
        "total": total,
        "filters": filters,
        "sort": sort,
        "orders": ORDERS,
        "facets": import_facets(db),
        "q": q,
        "hits": hits,
        "search_error": search_error,
        "cost_models": models,
        "cost_days": by_day,
        "cost_total": sum(c.cost_usd for c in costs),
        "page": page,
        "newer": link(page - 1) if page > 1 else None,
        "older": link(page + 1) if page * PAGE_SIZE < total else None,
    }


SessionId = Annotated[UUID, Path(alias="id", description="The import session's id.")]


@router.get("/transcripts/{id}", response_class=HTMLResponse)
async def transcript_page(
    session_id: SessionId, request: Request, page: PageNumber = 1
) -> HTMLResponse:
    """One imported session rendered from its NormalizedMessages."""
    db: Database = request.app.state.runtime.db
    view = await run_blocking(_transcript, db, str(session_id), page)
    title = view["session"].title or f"Transcript {str(session_id)[:8]}"
    return render(request, "transcript.html", title=title[:80], **view)


def _transcript(db: Database, session_id: str, page: int) -> dict[str, Any]:
    row, transcript = normalized_messages(db, session_id)
    messages = transcript.messages
    start = (page - 1) * MESSAGES_PER_PAGE
    shown = messages[start : start + MESSAGES_PER_PAGE]
    base = f"/transcripts/{session_id}"
    return {
        "session": row,
        "items": build_items(shown),
        "message_count": len(messages),
        "first_shown": start + 1,
        "last_shown": start + len(shown),
        "problems": session_problems(db, session_id),
        "page": page,
        "newer": f"{base}?page={page - 1}" if page > 1 else None,
        "older": f"{base}?page={page + 1}" if start + MESSAGES_PER_PAGE < len(messages) else None,
    }
