"""The English dashboard carries no Japanese or Chinese text of its own (issue 32, "English
pages carry no Japanese strings"), over plain HTTP against a real `opencrab up`.

Every page route of the dashboard (walked from its routers, so pages added later are held
to it too) is fetched for an `en` agent whose own data is ASCII: nothing in the HTML is
written in kana, CJK ideographs or full-width forms. Japanese belongs to `ja` agents.
"""

from __future__ import annotations

import importlib
import re

import httpx
from fastapi.routing import APIRoute

from opencrab.dashboard.routes import PAGE_MODULES
from tests.dashboard.conftest import QUIET, make_agent
from tests.fakes.llm_server import FakeLlmServer

CJK = re.compile("[\u3040-\u30ff\u4e00-\u9fff\uff00-\uffef]+")
UNKNOWN = "00000000-0000-4000-8000-000000000000"
"""An id no record has: the route answers its (English) not-found page."""


def page_paths() -> list[tuple[str, str]]:
    """Every GET page route of the dashboard, as (module, path template)."""
    found = []
    for name in PAGE_MODULES:
        router = importlib.import_module(name).router
        for route in router.routes:
            if isinstance(route, APIRoute) and "GET" in route.methods:
                found.append((name.rsplit(".", 1)[-1], route.path))
    return found


def filled(module: str, template: str, values: dict[str, str]) -> str:
    """`template` with its parameters replaced by this test's records (`id` by module)."""
    ids = {"session_view": values["session"], "sessions": values["session"]}
    ids["tickets"] = values["ticket"]
    path = template.replace("{name}", values["name"]).replace("{skill}", values["skill"])
    path = path.replace("{trace_id}", values["session"])
    return path.replace("{id}", ids.get(module, UNKNOWN))


def japanese_in(html: str) -> list[str]:
    """Each run of Japanese/Chinese characters in `html`, with some context."""
    return [html[max(0, m.start() - 60) : m.end() + 20] for m in CJK.finditer(html)]


def test_every_english_page_is_free_of_japanese_and_chinese(
    api: httpx.Client, llm: FakeLlmServer
) -> None:
    agent = make_agent(
        api, "Ada", language="en", description="Keeps notes", heartbeat=QUIET, prompt="Be terse."
    )
    session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    said = api.post(f"/api/sessions/{session}/messages", json={"content": "Hello there"})
    assert said.status_code == 201, said.text
    made = api.post("/api/tickets", json={"agentId": agent["id"], "context": {"goal": "Write"}})
    assert made.status_code == 201, made.text
    skills = api.get(f"/api/agents/{agent['id']}/skills").json()
    assert skills, "an en agent starts with its standard skills"
    values = {
        "name": "Ada",
        "session": session,
        "ticket": made.json()["id"],
        "skill": skills[0]["id"],
    }
    paths = page_paths()
    assert {"/", "/settings/llm", "/agent-mode", "/login"} <= {p for _, p in paths}

    found: dict[str, list[str]] = {}
    for module, template in paths:
        path = filled(module, template, values)
        response = api.get(path, follow_redirects=True)
        assert response.status_code < 500, (path, response.text[:500])
        if hits := japanese_in(response.text):
            found[path] = hits
    # the same pages with a search a person might type
    for path in ("/agents/Ada/memory?q=notes", "/transcripts?q=notes", "/analytics?days=7"):
        if hits := japanese_in(api.get(path, follow_redirects=True).text):
            found[path] = hits
    report = "\n".join(f"{path}: {hit!r}" for path, hits in found.items() for hit in hits)
    assert not found, f"Japanese/Chinese text in English pages:\n{report}"
