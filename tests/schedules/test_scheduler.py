"""The schedules running in `opencrab up`'s app (in process), on SQLite and PostgreSQL:
each slot recorded once with what it produced, pause and resume, run-now, a window
missed while no process ran (run once or skipped: never a burst), a spent budget, a run
whose process died, and the failed runs waiting for a person."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.core.sessions import session_messages
from opencrab.schedules import service
from opencrab.schedules.spec import parse_input
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.repositories import schedules as repo
from tests.fakes.llm_server import FakeLlmServer
from tests.schedules.conftest import CHAT, echo, runs, wait_for
from tests.server.local import LocalClient


def ended(api: TestClient, schedule_id: str, n: int) -> list[dict[str, object]]:
    """Wait for `n` runs of the schedule that ended; its runs."""
    return wait_for(
        f"{n} ended runs",
        lambda: (
            (found := runs(api, schedule_id))
            and sum(r["endedAt"] is not None for r in found) >= n
            and found
        ),
    )


def test_an_interval_schedule_runs_each_slot_once_and_records_what_it_made(
    api: TestClient, agent: str, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.respond(CHAT, echo)
    made = api.post(
        f"/api/agents/{agent}/schedules",
        json={"everySecs": 1, "action": {"kind": "turn", "prompt": "Check the build"}},
    )
    assert made.status_code == 201, made.text
    schedule = made.json()
    assert schedule["kind"] == "every"
    assert schedule["createdBy"] == "api:local"
    assert schedule["nextSlot"] is not None
    assert schedule["name"] == "Check the build"
    wait_for(
        "three runs that succeeded",
        lambda: sum(r["status"] == "succeeded" for r in runs(api, schedule["id"])) >= 3,
    )
    every = [r for r in runs(api, schedule["id"]) if r["endedAt"] is not None]
    slots = [datetime.fromisoformat(r["slot"]) for r in every]
    first = datetime.fromisoformat(schedule["createdAt"]) + timedelta(seconds=1)
    # every slot since the schedule was made is recorded once, in order
    assert slots == [first + timedelta(seconds=n) for n in range(len(slots))]
    for run in every:
        assert run["trigger"] == "slot"
        if run["status"] == "skipped":  # a slot that came while a run was still going
            assert run["detail"] == "the previous run was still going"
            continue
        assert run["status"] == "succeeded", run
        assert run["detail"] == "done: Check the build"
        assert run["sessionId"] is not None
        assert run["process"]
        assert run["endedAt"] >= run["startedAt"] >= run["slot"]
    found = [r for r in every if r["status"] == "succeeded"]
    assert len({r["sessionId"] for r in found}) == len(found)  # a new session per run
    listed = api.get("/api/schedules", params={"agent": "aki"}).json()
    assert [s["id"] for s in listed] == [schedule["id"]]


def test_pause_resume_and_delete(
    api: TestClient, agent: str, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.respond(CHAT, echo)
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={"everySecs": 1, "action": {"kind": "turn", "prompt": "tick"}},
    ).json()
    ended(api, schedule["id"], 1)
    paused = api.post(f"/api/schedules/{schedule['id']}/pause").json()
    assert paused["paused"] is True
    assert paused["nextSlot"] is None
    paused_at = datetime.now(UTC)
    before = len(runs(api, schedule["id"]))
    wait_for("two slots to pass", lambda: datetime.now(UTC) > paused_at + timedelta(seconds=2.5))
    assert len(runs(api, schedule["id"])) <= before + 1  # at most the one claimed meanwhile
    resumed = api.post(f"/api/schedules/{schedule['id']}/resume").json()
    resumed_at = datetime.fromisoformat(resumed["updatedAt"])
    assert resumed["paused"] is False
    found = wait_for(
        "a run after the resume",
        lambda: [r for r in runs(api, schedule["id"]) if r["slot"] > resumed["updatedAt"]],
    )
    assert datetime.fromisoformat(found[0]["slot"]) > resumed_at
    missed = [
        r
        for r in runs(api, schedule["id"])
        if paused_at + timedelta(seconds=1) < datetime.fromisoformat(r["slot"]) < resumed_at
    ]
    assert missed == []  # the slots while paused were not run late
    # an agent's schedules pause and resume as one
    assert api.post(f"/api/agents/{agent}/schedules/pause").json() == {"changed": 1}
    assert api.get(f"/api/schedules/{schedule['id']}").json()["paused"] is True
    assert api.post("/api/agents/aki/schedules/resume").json() == {"changed": 1}
    assert api.delete(f"/api/schedules/{schedule['id']}").status_code == 204
    assert api.get(f"/api/schedules/{schedule['id']}").status_code == 404
    assert api.get(f"/api/schedules/{schedule['id']}/runs").status_code == 404


def test_run_now_records_a_manual_run(
    api: TestClient, agent: str, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.respond(CHAT, echo)
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={
            "cron": "0 9 * * 1",
            "timezone": "Asia/Tokyo",
            "action": {"kind": "turn", "prompt": "Weekly"},
        },
    ).json()
    started = api.post(f"/api/schedules/{schedule['id']}/run-now")
    assert started.status_code == 202, started.text
    run_id = started.json()["runId"]
    (run,) = ended(api, schedule["id"], 1)
    assert run["id"] == run_id
    assert run["trigger"] == "manual"
    assert run["status"] == "succeeded"
    assert api.get(f"/api/schedules/{schedule['id']}").json()["lastSlot"] is None  # no slot taken
    assert api.post("/api/schedules/not-a-uuid/run-now").status_code == 404


@pytest.mark.parametrize("catch_up", ["once", "skip"])
def test_a_window_missed_while_no_process_ran_is_one_run_or_skipped_never_a_burst(
    schedule_settings: Settings,
    app_db: Database,
    fake_llm_server: FakeLlmServer,
    catch_up: str,
) -> None:
    fake_llm_server.respond(CHAT, echo)
    agent = AgentStore(app_db, schedule_settings).create(
        AgentCreate(name="aki", prompt="Terse.", heartbeat=HeartbeatConfig(enabled=False))
    )
    made_at = datetime.now(UTC) - timedelta(minutes=65)
    given = parse_input(
        {"everySecs": 600, "catchUp": catch_up, "action": {"kind": "turn", "prompt": "Report"}}
    )
    row = service.create_schedule(
        app_db, schedule_settings, agent.id, given, created_by="test", now=made_at
    )  # six slots (10, 20, …, 60 minutes after) passed while nothing ran
    with LocalClient(create_app(schedule_settings, app_db, schedules=True)) as api:
        (run,) = ended(api, row.id, 1)
        assert run["trigger"] == "late"
        assert datetime.fromisoformat(run["slot"]) == made_at + timedelta(minutes=60)  # the latest
        if catch_up == "once":
            assert run["status"] == "succeeded"
            assert run["detail"] == "done: Report"
        else:
            assert run["status"] == "skipped"
            assert "catchUp: skip" in run["detail"]
        # the scheduler has passed the schedule by: it waits for the next slot now
        wait_for(
            "the next slot to be waited for",
            lambda: api.get(f"/api/schedules/{row.id}").json()["lastSlot"],
        )
        assert len(runs(api, row.id)) == 1
    assert len(fake_llm_server.requests_to(CHAT)) == (1 if catch_up == "once" else 0)


def test_a_spent_budget_skips_the_run_and_says_why(
    api: TestClient, agent: str, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.respond(CHAT, echo)
    capped = api.put("/api/budgets", json={"dailyUsd": 0.0})
    assert capped.status_code == 200, capped.text
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={"everySecs": 1, "action": {"kind": "turn", "prompt": "Spend"}},
    ).json()
    (run, *_) = ended(api, schedule["id"], 1)
    assert run["status"] == "skipped", run
    assert "budget" in run["detail"].lower(), run
    assert fake_llm_server.requests_to(CHAT) == []


def test_a_run_whose_process_died_is_abandoned_and_waits_for_a_person(
    schedule_settings: Settings, app_db: Database
) -> None:
    agent = AgentStore(app_db, schedule_settings).create(
        AgentCreate(name="aki", prompt="Terse.", heartbeat=HeartbeatConfig(enabled=False))
    )
    given = parse_input(
        {"cron": "0 0 1 1 *", "timezone": "UTC", "action": {"kind": "turn", "prompt": "Yearly"}}
    )
    row = service.create_schedule(app_db, schedule_settings, agent.id, given, created_by="test")
    with app_db.write() as conn:  # a run another machine's process started, then died
        run_id = repo.claim_slot(
            conn,
            row.id,
            datetime.now(UTC),
            trigger="manual",
            process="elsewhere:4242:up:dead",
            now=datetime.now(UTC),
        )
    assert run_id is not None
    with LocalClient(create_app(schedule_settings, app_db, schedules=True)) as api:
        (run,) = wait_for(
            "the run to be abandoned",
            lambda: [r for r in runs(api, row.id) if r["status"] == "abandoned"],
        )
        assert run["id"] == run_id
        assert "abandoned" in run["detail"]
        failed = api.get("/api/schedule-runs/failed", params={"agent": "aki"}).json()
        assert [r["id"] for r in failed] == [run_id]
        # it waits in the inbox too, and a dismissal there acknowledges it
        waiting = api.get("/api/inbox", params={"kind": "schedule_failure"}).json()
        (item,) = waiting["items"]
        assert (item["id"], item["subjectId"]) == (f"schedule_failure:{run_id}", run_id)
        assert (item["agent"], item["link"]) == ("aki", "/schedules")
        assert "was abandoned" in item["summary"]
        assert api.post(f"/api/inbox/{item['id']}/dismiss").status_code == 200
        assert api.get("/api/schedule-runs/failed").json() == []
        assert api.get("/api/inbox").json()["counts"]["schedule_failure"] == 0
        assert api.post(f"/api/schedule-runs/{run_id}/acknowledge").status_code == 404


def test_a_ticket_action_creates_a_ticket_from_its_template(api: TestClient, agent: str) -> None:
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={
            "everySecs": 1,
            "action": {"kind": "ticket", "template": {"context": {"goal": "Rotate the logs"}}},
        },
    ).json()
    (run, *_) = ended(api, schedule["id"], 1)
    assert run["status"] == "succeeded"
    assert run["ticketId"]
    ticket = api.get(f"/api/tickets/{run['ticketId']}").json()
    assert ticket["context"] == {"goal": "Rotate the logs"}
    assert ticket["agentId"] == agent


def test_a_post_action_without_its_gateway_here_fails_saying_so(
    api: TestClient, agent: str
) -> None:
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={
            "everySecs": 1,
            "action": {
                "kind": "post",
                "prompt": "Hi",
                "home": {"gateway": "discord", "channel": "42"},
            },
        },
    ).json()
    (run, *_) = ended(api, schedule["id"], 1)
    assert run["status"] == "failed"
    assert "discord gateway is not running" in run["detail"]
    failed = api.get("/api/schedule-runs/failed").json()
    assert run["id"] in [r["id"] for r in failed]


def test_the_session_of_a_turn_action_holds_the_prompt(
    api: TestClient, agent: str, app_db: Database, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.respond(CHAT, echo)
    session = api.post("/api/sessions", json={"agentId": agent}).json()["id"]
    schedule = api.post(
        f"/api/agents/{agent}/schedules",
        json={"everySecs": 1, "action": {"kind": "turn", "prompt": "Nudge", "sessionId": session}},
    ).json()
    found = wait_for(
        "two runs that succeeded",
        lambda: (
            [r for r in runs(api, schedule["id"]) if r["status"] == "succeeded"][1:]
            and runs(api, schedule["id"])
        ),
    )
    assert {r["sessionId"] for r in found if r["status"] == "succeeded"} == {session}
    said = [m.content for m in session_messages(app_db, session)]
    assert said.count("done: Nudge") >= 2  # each run's turn, one after the other, in it
