"""Starting a discussion (`/discussions/new`): the form `POST /api/discussions` takes.

`static/js/discussions.js` sends it (the participants as a list) and opens the new
discussion's live view.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import MAX_NAME
from opencrab.core.discussion import DEFAULT_MAX_TURNS, MAX_PARTICIPANTS
from opencrab.core.runtime import Runtime
from opencrab.dashboard.render import render
from opencrab.offload import run_blocking

router = APIRouter()


@router.get("/discussions/new", response_class=HTMLResponse)
async def new_discussion(
    request: Request,
    participant: Annotated[list[str], Query(max_length=MAX_PARTICIPANTS)] = [],  # noqa: B006
) -> HTMLResponse:
    """The form; `participant` (agent names, repeatable) are ticked already."""
    runtime: Runtime = request.app.state.runtime
    names = await run_blocking(runtime.agents.names)
    agents = sorted(((i, n, lang) for i, (n, lang) in names.items()), key=lambda a: a[1])
    chosen = {p for p in participant if len(p) <= MAX_NAME}
    return render(
        request,
        "discussion_new.html",
        title="Start a discussion",
        agents=agents,
        chosen=chosen,
        max_turns=DEFAULT_MAX_TURNS,
        max_participants=MAX_PARTICIPANTS,
    )
