"""Two OpenCrab servers talking over A2A (issue 36): agent aki on server A has the remote
`ben` — agent ben served by server B at `/a2a/ben` (opencrab.a2a.server) — as its tool
`a2a__ben__ask` (opencrab.a2a.client), and asks it in a turn over A's REST API; B runs its
own turn and aki reads ben's answer. Both apps are `opencrab up`'s (create_app) on
loopback ports with their own data directories and databases; B requires bearer tokens,
which A sends from the variable its table names. Each model is a script
(tests/fakes/scripted_provider.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opencrab.auth import Scope, TokenStore
from opencrab.config import Settings, load_settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.core.conftest import calls
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.threaded_server import serve_in_thread

TOOL = "a2a__ben__ask"


def settings_in(folder: Path, **layer: Any) -> Settings:
    folder.mkdir(parents=True, exist_ok=True)
    return load_settings(overrides={"data_dir": str(folder), **layer})


@contextlib.contextmanager
def serve(settings: Settings, scripted: ScriptedProvider, *, auth: bool) -> Iterator[str]:
    """`opencrab up`'s app over its own database, its model `scripted`; yields its URL."""
    db = Database(settings.database_url)
    db.upgrade()
    router = LlmRouter(settings)
    router.register_provider(scripted)
    app = create_app(settings, db, router=router, auth=auth)
    with serve_in_thread(app, free_port()) as url:
        yield url


def test_an_agent_asks_an_agent_of_another_opencrab_over_a2a(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ben_model = ScriptedProvider("openai").then(reply("Six times seven is 42."))
    b_settings = settings_in(tmp_path / "b")
    b_db = Database(b_settings.database_url)
    b_db.upgrade()
    _, secret = TokenStore(b_db).create("server A", Scope.chat)  # what A may do on B
    _, admin = TokenStore(b_db).create("operator", Scope.admin)
    b_db.close()
    with serve(b_settings, ben_model, auth=True) as b_url:
        with httpx.Client(headers={"Authorization": f"Bearer {admin}"}) as b:
            made = b.post(f"{b_url}/api/agents", json={"name": "ben", "prompt": "You count."})
            assert made.status_code == 201, made.text

        monkeypatch.setenv("BEN_TOKEN", secret)
        remote = {"url": f"{b_url}/a2a/ben", "allow_private": True, "token_env": "BEN_TOKEN"}
        a_settings = settings_in(tmp_path / "a", a2a={"remotes": {"ben": remote}})
        aki_model = ScriptedProvider("openai").then(
            calls((TOOL, {"message": "What is six times seven?"})),
            reply("Ben says it is 42."),
        )
        with serve(a_settings, aki_model, auth=False) as a_url, httpx.Client(timeout=120) as a:
            made = a.post(f"{a_url}/api/agents", json={"name": "aki", "prompt": "You ask ben."})
            assert made.status_code == 201, made.text
            aki = made.json()["id"]
            granted = a.put(f"{a_url}/api/agents/{aki}/tools/{TOOL}", json={"granted": True})
            assert granted.status_code == 200, granted.text
            session = a.post(f"{a_url}/api/sessions", json={"agentId": aki}).json()["id"]
            posted = a.post(
                f"{a_url}/api/sessions/{session}/messages", json={"content": "Ask ben."}
            )
            assert posted.status_code == 201, posted.text
            turn = posted.json()["turn"]
            events = a.get(f"{a_url}/api/traces/{turn['traceId']}/events").json()

    (call,) = [action for action in turn["actions"] if action["name"] == TOOL]
    assert call["success"], call
    answer = json.loads(call["output"])
    assert answer["agent"] == "ben"
    assert answer["text"] == "Six times seven is 42."
    assert turn["reply"]["content"] == "Ben says it is 42."
    # the call's event has the remote's latency (B gives no cost: 0)
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert result["metadata"]["remote"] == "ben"
    assert result["metadata"]["cost_usd"] == 0.0
    assert isinstance(result["metadata"]["latency_ms"], int)
    # ben's own turn read aki's question
    (asked,) = ben_model.requests
    assert "What is six times seven?" in json.dumps([m.model_dump() for m in asked.messages])
    # aki's model was shown ben's card as the tool
    (tool,) = [t for t in aki_model.requests[0].tools or [] if t.name == TOOL]
    assert "Ask the remote agent ben (A2A)." in tool.description
