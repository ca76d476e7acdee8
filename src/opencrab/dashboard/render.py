"""The dashboard's template environment and what every page shares.

`render(request, "page.html", title=..., **context)` renders a page inside
`templates/base.html`. Navigation is data: `NAV` lists the top-level areas and
`AGENT_TABS` the tabs of one agent's pages, so a later area adds a line here rather
than editing templates.

Example:
    @router.get("/things", response_class=HTMLResponse)
    async def things(request: Request) -> HTMLResponse:
        return render(request, "things.html", title="Things", things=await load())
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from opencrab import __version__

HERE = Path(__file__).parent
STATIC_URL = "/static/dashboard"


@dataclass(frozen=True)
class NavItem:
    label: str
    href: str
    prefixes: tuple[str, ...]  # the paths under which this item is the current one

    def current(self, path: str) -> bool:
        return path == self.href or any(path.startswith(p) for p in self.prefixes)


NAV: list[NavItem] = [
    NavItem("Agents", "/", ("/agents",)),
    NavItem("Sessions", "/sessions", ("/sessions/", "/discussions")),
    NavItem("Tickets", "/tickets", ("/tickets/",)),
    NavItem("Schedules", "/schedules", ("/schedules/",)),
    NavItem("Transcripts", "/transcripts", ("/transcripts/", "/traces/")),
    NavItem("Analytics", "/analytics", ()),
    NavItem("Costs", "/costs", ()),
    NavItem("Budgets", "/budgets", ()),
    NavItem("LLM", "/settings/llm", ("/settings/llm",)),
    NavItem("MCP", "/settings/mcp", ("/settings/mcp",)),
    NavItem("Gateways", "/settings/gateways", ("/settings/gateways",)),
    NavItem("Agent mode", "/agent-mode", ("/agent-mode/",)),
]
"""The top bar's areas, in order: the agents' work (sessions, tickets, schedules,
imported transcripts), then what it amounts to (analytics, costs, budgets), then the settings."""

AGENT_TABS: list[tuple[str, str]] = [
    ("Persona", "persona"),
    ("Skills", "skills"),
    ("Memory", "memory"),
    ("Workspace", "workspace"),
    ("Sessions", "sessions"),
    ("Chat", "chat"),
    ("Analytics", "analytics"),
    ("LLM", "llm"),
    ("Tools", "tools"),
]
"""One agent's pages: (label, path under `/agents/{name}/`)."""


PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'self'; form-action 'self'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
"""Every page: only our own scripts (no inline ones), never inside another site's frame."""


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        nav=NAV,
        agent_tabs=AGENT_TABS,
        static=static_url,
        version=__version__,
    )
    env.filters.update(when=when, count=count, money=money, text_lang=text_lang)
    return env


def static_url(path: str) -> str:
    """A dashboard asset's URL, versioned so a new release is never served from cache."""
    return f"{STATIC_URL}/{path}?v={__version__}"


def render(
    request: Request,
    template: str,
    *,
    title: str,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """A whole page, with `PAGE_HEADERS`."""
    page = environment().get_template(template)
    html = page.render(
        request=request,
        path=request.url.path,
        title=title,
        login_required=bool(getattr(request.app.state, "auth_required", False)),
        **context,
    )
    return HTMLResponse(html, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})


def fragment(request: Request, template: str, **context: Any) -> HTMLResponse:
    """A template that is only a part of a page (an HTMX swap target)."""
    html = environment().get_template(template).render(request=request, **context)
    return HTMLResponse(html, headers=PAGE_HEADERS)


def when(value: datetime | str | None, style: str = "datetime") -> Markup:
    """A `<time>` the browser shows in its own time zone (UTC until the script runs)."""
    if value is None:
        return Markup("<span class=muted>never</span>")
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    iso = value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    shown = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Markup('<time datetime="{}" data-style="{}">{}</time>').format(iso, style, shown)


def count(value: int | float) -> str:
    """1234567 -> "1,234,567"."""
    return f"{value:,}"


def money(value: float | None) -> str:
    """US dollars with as many decimals as small sums need."""
    if value is None:
        return "–"
    if value == 0:
        return "$0"
    if 0 < value < 0.0001:
        return "<$0.0001"  # spent, but less than four decimals show
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def text_lang(text: str, default: str = "en") -> str:
    """A `lang` for text of unknown language: ja with kana in it, zh with Han but no
    kana, else `default` (so the CSS picks a CJK font for imported transcripts)."""
    han = False
    for ch in text[:2000]:
        code = ord(ch)
        if 0x3040 <= code <= 0x30FF:
            return "ja"
        han = han or 0x4E00 <= code <= 0x9FFF
    return "zh" if han else default
