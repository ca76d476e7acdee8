"""The schedules' REST API, MCP tools and the `schedule_task` action: bad input is a 400
naming the field (an invalid cron expression, an unknown time zone, an interval under
the minimum, a schedule for a deleted agent, one over the per-agent cap), and an agent
schedules its own work through the fake model calling schedule_task."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.core.tools import tool_id
from opencrab.mcp.tools import TOOLS, Caller
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.schedules.conftest import CHAT, echo, runs, tool_call, wait_for
from tests.server.local import LocalClient

TURN = {"kind": "turn", "prompt": "Stand-up summary"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "0 25 * * *", "timezone": "UTC"}, "cron:"),
        ({"cron": "every day", "timezone": "UTC"}, "cron:"),
        ({"cron": "0 9 * * 1-5", "timezone": "Europe/Atlantis"}, "timezone:"),
        ({"everySecs": 0}, "everySecs:"),
        ({"at": "2001-01-01T00:00:00Z"}, "at:"),
    ],
)
def test_bad_timing_is_a_400_naming_the_field(
    api: TestClient, agent: str, body: dict[str, Any], field: str
) -> None:
    refused = api.post(f"/api/agents/{agent}/schedules", json={**body, "action": TURN})
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"].startswith(field), refused.json()
    assert api.get("/api/schedules").json() == []  # nothing stored


def test_a_schedule_for_a_deleted_agent_is_a_400_naming_the_agent(
    api: TestClient, agent: str
) -> None:
    assert api.delete(f"/api/agents/{agent}").status_code == 204
    refused = api.post(f"/api/agents/{agent}/schedules", json={"everySecs": 60, "action": TURN})
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"].startswith("agent:")
    listed = api.get("/api/schedules", params={"agent": agent})
    assert listed.status_code == 400
    assert listed.json()["message"].startswith("agent:")


def test_an_unknown_field_and_an_interval_under_the_minimum_are_refused(
    schedule_settings: Settings, app_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCRAB_SCHEDULES__MIN_INTERVAL_SECS", "300")
    monkeypatch.setenv("OPENCRAB_SCHEDULES__MAX_PER_AGENT", "2")
    from opencrab.config import load_settings

    with LocalClient(create_app(load_settings(), app_db)) as api:
        agent = api.post("/api/agents", json={"name": "aki", "prompt": "Terse."}).json()["id"]
        path = f"/api/agents/{agent}/schedules"
        short = api.post(path, json={"everySecs": 299, "action": TURN})
        assert short.status_code == 400
        assert short.json()["message"].startswith("everySecs: 299 is under the minimum")
        minutely = api.post(path, json={"cron": "*/2 * * * *", "timezone": "UTC", "action": TURN})
        assert minutely.status_code == 400
        assert minutely.json()["message"].startswith("cron:")
        extra = api.post(path, json={"everySecs": 600, "action": TURN, "colour": "red"})
        assert extra.status_code == 400
        assert "colour" in extra.json()["message"]
        for _ in range(2):
            assert api.post(path, json={"everySecs": 600, "action": TURN}).status_code == 201
        third = api.post(path, json={"everySecs": 600, "action": TURN})
        assert third.status_code == 400
        assert third.json()["message"].startswith("agent:")
        assert "max_per_agent" in third.text
        assert len(api.get("/api/schedules").json()) == 2
        assert api.get("/api/schedules/7d1c0e7e-0000-4000-8000-000000000000").status_code == 404


async def test_mcp_creates_and_lists_schedules(api: TestClient, agent: str) -> None:
    runtime = api.app.state.runtime  # type: ignore[attr-defined]
    caller = Caller("claude")
    made = await TOOLS["create_schedule"].run(
        runtime,
        {"agent": "aki", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "action": TURN},
        caller,
    )
    assert made["createdBy"] == "mcp:claude"
    assert made["kind"] == "cron"
    listed = await TOOLS["list_schedules"].run(runtime, {"agent": "aki"}, caller)
    assert [s["id"] for s in listed] == [made["id"]]
    assert await TOOLS["list_schedule_runs"].run(runtime, {"schedule_id": made["id"]}, caller) == []


def test_the_agent_schedules_its_own_work_through_schedule_task(
    api: TestClient, fake_llm_server: FakeLlmServer
) -> None:
    body = {
        "name": "aki",
        "prompt": "You are terse.",
        "heartbeat": {"enabled": False},
        "toolIds": [tool_id("schedule_task")],  # granted like any tool
    }
    agent = api.post("/api/agents", json=body).json()["id"]
    script = [
        Reply(json=tool_call("schedule_task", {"prompt": "Check the build", "everySecs": 0})),
        Reply(json=tool_call("schedule_task", {"prompt": "Check the build", "everySecs": 1})),
        Reply(json=completion({"content": "I will check the build every second."})),
    ]
    # the chat turn's three calls, then the scheduled turns
    fake_llm_server.respond(CHAT, lambda request: script.pop(0) if script else echo(request))
    session = api.post("/api/sessions", json={"agentId": agent}).json()["id"]
    said = api.post(
        f"/api/sessions/{session}/messages", json={"content": "Keep an eye on the build."}
    )
    assert said.status_code == 201, said.text
    # the first call was refused naming the field, the model corrected it
    second = fake_llm_server.requests_to(CHAT)[1].json["messages"]
    refusal = [m for m in second if m["role"] == "tool"][-1]["content"]
    assert "everySecs" in refusal
    (schedule,) = api.get("/api/schedules", params={"agent": agent}).json()
    assert schedule["createdBy"] == "agent"
    assert schedule["everySecs"] == 1
    assert schedule["action"] == {"kind": "turn", "prompt": "Check the build"}
    found = wait_for(
        "a scheduled turn that succeeded",
        lambda: [r for r in runs(api, schedule["id"]) if r["status"] == "succeeded"],
    )
    assert found[0]["detail"] == "done: Check the build"
    assert found[0]["sessionId"] != session  # a new session per run
