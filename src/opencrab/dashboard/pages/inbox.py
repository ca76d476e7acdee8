"""The inbox (`/inbox`): everything waiting for a person, answered in place.

It reads what `GET /api/inbox` answers (opencrab.reports.inbox.inbox_view), narrowed by
`?agent=` and `?kind=`. Each item is decided or answered through the REST route its own
page uses: a held call with `/api/approvals/{id}/approve|deny`, a ticket's question with
`POST /api/sessions/{session}/messages`, an agent-mode question with its task's
`answer`, a budget alert or spend alarm with `POST /api/inbox/{id}/dismiss`. The list
is also served alone at `/inbox/items`, which the page's script swaps in when the top
bar's live count (static/js/inbox_count.js) changes and nobody is typing in it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import MAX_NAME
from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import fragment, render
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.reports import inbox
from opencrab.reports.inbox import InboxView

router = APIRouter()

KIND_LABELS = {
    "approval": "Held tool call",
    "ticket_question": "Ticket question",
    "agent_mode_question": "Agent-mode question",
    "budget_alert": "Budget alert",
    "spend_alarm": "Spend alarm",
    "schedule_failure": "Failed schedule run",
}
"""How the page names a kind (a kind it does not know is shown by its name)."""

Agent = Annotated[str, Query(max_length=MAX_NAME)]
Kind = Annotated[str, Query(max_length=64)]


async def _view(runtime: Runtime, agent: str, kind: str) -> dict[str, Any]:
    names = await run_blocking(runtime.agents.names)
    kinds = list(inbox.SOURCES)
    unknown = ""
    try:
        view = await inbox.inbox_view(
            runtime, agent=agent or None, kinds=[kind] if kind else None, limit=200
        )
    except NotFoundError:  # an agent that is not (or no longer) there: nothing listed
        unknown = agent
        setting = await run_blocking(inbox.notify_setting, runtime)
        view = InboxView(items=[], count=0, counts={}, notifications=setting)
    return {
        "view": view,
        "agent": agent,
        "kind": kind,
        "kinds": [(k, KIND_LABELS.get(k, k)) for k in kinds],
        "labels": KIND_LABELS,
        "unknown_agent": unknown,
        "agents": sorted((name, lang) for name, lang in names.values()),
        "languages": {i: lang for i, (_, lang) in names.items()},
        "default_language": runtime.settings.agent.language,
    }


@router.get("/inbox", response_class=HTMLResponse)
async def inbox_page(request: Request, agent: Agent = "", kind: Kind = "") -> HTMLResponse:
    """Every item waiting for a person, newest first, each answerable here."""
    runtime: Runtime = request.app.state.runtime
    view = await _view(runtime, agent.strip(), kind.strip())
    return render(request, "inbox.html", title="Inbox", **view)


@router.get("/inbox/items", response_class=HTMLResponse)
async def inbox_items(request: Request, agent: Agent = "", kind: Kind = "") -> HTMLResponse:
    """The list alone, for the page to swap in when the count changes."""
    runtime: Runtime = request.app.state.runtime
    view = await _view(runtime, agent.strip(), kind.strip())
    return fragment(request, "_inbox_items.html", **view)
