"""web_search (seed 001's web search): off until a backend is configured.

`[tools] web_search = "searxng"` with `web_search_url` (a SearXNG instance whose JSON
API is on: `search.formats` includes `json`) switches it on for every agent that may
call it (its skills or its grants name it). The query goes through the same guarded
client as http_request (opencrab.actions.http_client): only public addresses unless
`[tools] http_allow_networks` lets the instance's through, a time cap and a body cap.

Example:
    [tools]
    web_search = "searxng"
    web_search_url = "https://searx.example.org"
"""

from __future__ import annotations

import json
from typing import Any, ClassVar
from urllib.parse import urlencode

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.http_client import fetch
from opencrab.actions.workspace import object_schema
from opencrab.plugins import hookimpl

MAX_SNIPPET_CHARS = 1_000


class WebSearch(Action):
    name = "web_search"
    description = (
        "Search the web and get the top results (title, URL, snippet). Only when an "
        "operator configured a search backend."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["query"],
        query={"type": "string", "minLength": 1, "maxLength": 500},
        max_results={"type": "integer", "minimum": 1, "maximum": 50},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        tools = ctx.settings.tools
        if tools.web_search == "off":
            return ActionResult.fail(
                'web_search is off: an operator sets [tools] web_search = "searxng" and '
                "web_search_url (a SearXNG instance with its JSON API on) in the config"
            )
        if not tools.web_search_url:
            return ActionResult.fail(
                "web_search has no backend URL: set [tools] web_search_url in the config"
            )
        limit = min(args.get("max_results", tools.web_search_max_results), 50)
        query = urlencode({"q": args["query"], "format": "json"})
        url = f"{tools.web_search_url.rstrip('/')}/search?{query}"
        reply = await fetch(tools, "GET", url, headers={"accept": "application/json"})
        if reply.status >= 400:
            return ActionResult.fail(f"the search backend answered HTTP {reply.status}")
        try:
            found = json.loads(reply.text())
            rows = found["results"]
            results = [
                {
                    "title": str(r.get("title") or ""),
                    "url": str(r["url"]),
                    "snippet": str(r.get("content") or "")[:MAX_SNIPPET_CHARS],
                }
                for r in rows[:limit]
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            return ActionResult.fail(
                "the search backend's answer is not SearXNG's JSON (is `json` in its "
                "search.formats?)"
            )
        return ActionResult.ok({"query": args["query"], "results": results})


@hookimpl
def register_actions(register: Any) -> None:
    register(WebSearch())
