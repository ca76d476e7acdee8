"""An in-process server with the ticket scheduler running, its model a script of tool
calls (tests/fakes/scripted_provider.py), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings, load_settings
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatResponse, ToolCall
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.local import LocalClient

_ids = count(1)


def calls(*pairs: tuple[str, dict[str, Any]]) -> ChatResponse:
    """A model reply calling actions, e.g. calls(("add_step", {"title": "read"}))."""
    return reply(
        tool_calls=[
            ToolCall(
                id=f"call_{next(_ids)}",
                name=name,
                arguments=arguments,
                raw_arguments=json.dumps(arguments, ensure_ascii=False),
            )
            for name, arguments in pairs
        ]
    )


def openai_tool_reply(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI chat completion calling actions (the fake server's wire format)."""
    tool_calls = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        for name, arguments in pairs
    ]
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def wait_for(what: str, done: Callable[[], Any], secs: float = 60) -> Any:
    """Poll `done` until it returns something true (gives up after `secs`)."""
    deadline = time.monotonic() + secs
    while not (found := done()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return found


@pytest.fixture
def fast_settings(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The test settings with the scheduler looking for work every 50 ms."""
    monkeypatch.setenv("OPENCRAB_TICKETS__POLL_SECS", "0.05")
    return load_settings()


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider("openai")  # each test queues its replies, the last one repeating


@pytest.fixture
def api(
    fast_settings: Settings, any_db: Database, scripted: ScriptedProvider
) -> Iterator[TestClient]:
    """`opencrab up`'s app in process, with the ticket scheduler."""
    router = LlmRouter(fast_settings)
    router.register_provider(scripted)
    app = create_app(fast_settings, any_db, router=router, tickets=True)
    with LocalClient(app) as client:
        yield client


@pytest.fixture
def agent(api: TestClient) -> dict[str, Any]:
    response = api.post("/api/agents", json={"name": "aki", "prompt": "Work on tickets."})
    assert response.status_code == 201, response.text
    return dict(response.json())
