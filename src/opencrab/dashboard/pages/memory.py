"""Memory (seed 001 "3. 記憶閲覧・検索"): search the session logs, curated memory, impressions.

`/agents/{name}/memory?q=東京&logType=speech` renders the whole page with the search's
hits (a GET form: it works without JavaScript); HTMX asks `/agents/{name}/memory/search`
for the hits alone and swaps them in place. Curated memories are changed through the
public REST API (`/api/agents/{id}/memory/curated…`), after which HTMX reloads the
`/agents/{name}/memory/curated` fragment. The export links point at the REST route
`/api/agents/{id}/memory/export`. Reads call the MemoryManager the API calls. The search
is hybrid once the agent's lines are embedded: each hit says whether its words matched
(lexical) or its meaning was near (vector), and the page says how far the embedding is.
A search naming a time ("last Tuesday", 昨日) says which span it looked in (both legs
search it). The recall panel shows the agent's `opencrab memory eval` runs: the latest
run's table and a chart of each leg's recall@5 over the runs (inline SVG, drawn here, no
script).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Annotated, Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.memory import (
    MAX_QUERY_CHARS,
    CuratedMemory,
    Impression,
    MemoryManager,
    SearchResult,
    SessionSummary,
    search_terms,
)
from opencrab.core.memory_eval import EvalRun
from opencrab.core.memory_eval import runs as eval_runs
from opencrab.core.memory_index import IndexProgress, progress
from opencrab.core.memory_time import TimeWindow
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import fragment, render
from opencrab.dashboard.snippets import snippet
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.store import Database

router = APIRouter()

SEARCH_LIMIT = 50
RECENT_SESSIONS = 10
LOG_TYPE_LABELS = {
    "speech": "Speech",
    "inner_voice": "Inner voice",
    "action": "Action",
    "system": "System",
}
SEARCH_EXAMPLES = {"en": "Tokyo, tomatoes…", "ja": "東京, トマト…", "zh": "北京, 西红柿…"}
"""The search box's placeholder, in the agent's language (what its logs are written in)."""

SearchText = Annotated[
    str, Query(max_length=MAX_QUERY_CHARS, description="Words to find in the session logs.")
]
LogTypeFilter = Annotated[
    Literal["", "speech", "inner_voice", "action", "system"],
    Query(alias="logType", description="Only lines of this kind; all when empty."),
]


@dataclass(frozen=True)
class Hit:
    """A search result as the page shows it: the line cut around its match."""

    log: SearchResult
    pieces: list[tuple[str, bool]]
    speaker: str


@dataclass
class Search:
    """The search form's state and, when it asked something, what was found."""

    q: str = ""
    log_type: str = ""
    asked: bool = False
    hits: list[Hit] = field(default_factory=list)
    note: str = ""  # which legs ran ("hybrid: …", or "lexical only: " and why)
    hybrid: bool = False
    window: TimeWindow | None = None  # the span of time the query named

    @property
    def full(self) -> bool:
        """True when there may be more hits than were shown."""
        return len(self.hits) >= SEARCH_LIMIT


EVAL_RUNS_CHARTED = 30
CHART_W, CHART_H, CHART_PAD, CHART_LEFT = 320, 110, 8, 30  # the left margin holds the labels


@dataclass(frozen=True)
class Line:
    """One leg's recall@5 over the runs, as an SVG polyline."""

    leg: str
    color: int  # --chart-N
    points: str
    last: float


@dataclass(frozen=True)
class Recall:
    """The eval panel: the latest run and the chart of the runs, oldest to newest."""

    latest: EvalRun | None
    runs: int
    lines: list[Line]
    first_at: str = ""
    last_at: str = ""


def recall_chart(runs: list[EvalRun]) -> Recall:
    """The panel of `runs` (newest first, as stored): one line per leg that has figures."""
    if not runs:
        return Recall(None, 0, [])
    ordered = list(reversed(runs[:EVAL_RUNS_CHARTED]))
    names = [
        n for n in ordered[-1].legs if any(r.legs.get(n, {}).get("available") for r in ordered)
    ]
    lines = []
    span = max(1, len(ordered) - 1)
    for index, name in enumerate(names):
        points = []
        for i, run in enumerate(ordered):
            leg = run.legs.get(name, {})
            if not leg.get("available"):
                continue
            width = CHART_W - CHART_LEFT - CHART_PAD
            x = CHART_LEFT + width * (i / span if len(ordered) > 1 else 0.5)
            y = CHART_H - CHART_PAD - (CHART_H - 2 * CHART_PAD) * float(leg["recall@5"])
            points.append(f"{x:.1f},{y:.1f}")
        last = next(
            float(r.legs[name]["recall@5"])
            for r in reversed(ordered)
            if r.legs.get(name, {}).get("available")
        )
        lines.append(Line(name, index % 8 + 1, " ".join(points), last))
    return Recall(
        runs[0],
        len(ordered),
        lines,
        first_at=f"{ordered[0].created_at:%Y-%m-%d}",
        last_at=f"{ordered[-1].created_at:%Y-%m-%d}",
    )


@dataclass(frozen=True)
class Remembered:
    """Everything the page shows besides the search."""

    curated: list[tuple[str, list[CuratedMemory]]]
    impressions: list[tuple[str, list[Impression]]]
    sessions: list[SessionSummary]
    index: IndexProgress | None  # how far the lines are embedded (None: no agent row)
    recall: Recall


def _memory(request: Request, agent: Agent) -> MemoryManager:
    db: Database = request.app.state.db
    return MemoryManager(db, agent.id)


def _search(memory: MemoryManager, agents: AgentStore, q: str, log_type: str) -> Search:
    """The hits of `q` (none asked when it has no words); agents' ids shown as names."""
    terms = search_terms(q)
    found = Search(q=q, log_type=log_type, asked=bool(terms))
    if not terms:
        return found
    detail = memory.search_detail(q, limit=SEARCH_LIMIT, log_types=[log_type] if log_type else None)
    results = detail.hits
    found.note, found.hybrid = detail.note, "vector" in detail.legs
    found.window = detail.window
    names = {id: name for id, name, _ in agents.summaries()} if results else {}
    found.hits = [
        Hit(
            log=r,
            pieces=snippet(r.content, terms),
            speaker=names.get(r.speaker_id or "", r.speaker_id or ""),
        )
        for r in results
    ]
    return found


def _curated(memory: MemoryManager) -> list[tuple[str, list[CuratedMemory]]]:
    """Curated memories by category ("core" first: it is always in the prompt)."""
    items = sorted(memory.list_curated(), key=lambda m: (m.category != "core", m.category))
    return [(category, list(group)) for category, group in groupby(items, lambda m: m.category)]


def _remembered(memory: MemoryManager, settings: Settings) -> Remembered:
    impressions = memory.all_impressions()
    try:
        index: IndexProgress | None = progress(memory.db, settings, memory.agent_id)
    except NotFoundError:
        index = None
    return Remembered(
        index=index,
        curated=_curated(memory),
        impressions=[
            (target, list(group)) for target, group in groupby(impressions, lambda i: i.target_id)
        ],
        sessions=memory.sessions(limit=RECENT_SESSIONS),
        recall=recall_chart(eval_runs(memory.db, memory.agent_id, limit=EVAL_RUNS_CHARTED)),
    )


def page_url(agent: Agent, q: str = "", log_type: str = "") -> str:
    """The memory page's address, with the search when there is one."""
    base = f"/agents/{quote(agent.name, safe='')}/memory"
    params = {k: v for k, v in (("q", q), ("logType", log_type)) if v}
    return f"{base}?{urlencode(params)}" if params else base


@router.get("/agents/{name}/memory", response_class=HTMLResponse)
async def memory_page(
    agent: PageAgent, request: Request, q: SearchText = "", log_type: LogTypeFilter = ""
) -> HTMLResponse:
    """The agent's memory: search, curated memories, impressions, export."""
    memory = _memory(request, agent)
    search = await run_blocking(_search, memory, request.app.state.runtime.agents, q, log_type)
    remembered = await run_blocking(_remembered, memory, request.app.state.settings)
    return render(
        request,
        "memory.html",
        title=f"Memory · {agent.name}",
        agent=agent,
        tab="memory",
        search=search,
        remembered=remembered,
        log_types=LOG_TYPE_LABELS,
        search_example=SEARCH_EXAMPLES[agent.language],
        chart=(CHART_W, CHART_H, CHART_PAD, CHART_LEFT),
    )


@router.get("/agents/{name}/memory/search", response_class=HTMLResponse)
async def memory_search(
    agent: PageAgent, request: Request, q: SearchText = "", log_type: LogTypeFilter = ""
) -> HTMLResponse:
    """The search's hits alone (HTMX swaps them in; the address bar shows the page's URL)."""
    agents = request.app.state.runtime.agents
    search = await run_blocking(_search, _memory(request, agent), agents, q, log_type)
    response = fragment(
        request, "memory_results.html", agent=agent, search=search, log_types=LOG_TYPE_LABELS
    )
    response.headers["HX-Push-Url"] = page_url(agent, q, log_type)
    return response


@router.get("/agents/{name}/memory/curated", response_class=HTMLResponse)
async def memory_curated(agent: PageAgent, request: Request) -> HTMLResponse:
    """The curated memories and the form to add one (reloaded after every change)."""
    curated = await run_blocking(_curated, _memory(request, agent))
    return fragment(request, "memory_curated.html", agent=agent, curated=curated)
