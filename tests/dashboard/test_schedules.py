"""The Schedules page (/schedules) in Chromium against a real `opencrab up`: a schedule
made in the form (a Japanese agent and prompt) is read back over REST, a bad cron
expression is shown next to its field, run now / pause work from the page, and a failed
run waits for a person until it is acknowledged there."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.dashboard.conftest import CHAT, QUIET, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.tickets.conftest import wait_for


def test_make_run_pause_and_acknowledge_schedules_in_the_page(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": "本日の要約：遅れはありません。"}))
    )
    hanako = make_agent(api, "ハナコ", language="ja", heartbeat=QUIET)
    make_agent(api, "aki", heartbeat=QUIET)
    p = page.page
    p.goto("/schedules")
    expect(p.get_by_role("heading", name="Schedules", exact=True)).to_be_visible()
    expect(p.get_by_text("No schedules yet.")).to_be_visible()

    form = p.locator("form[data-new-schedule]")
    form.get_by_label("Agent").select_option(label="ハナコ")
    form.get_by_label("Name").fill("朝のまとめ")
    form.get_by_label("Prompt").fill("昨日のチケットからスタンドアップの要約を書いてください。")
    form.get_by_label("Cron expression").fill("61 9 * * 1-5")
    form.get_by_label("Time zone").fill("Asia/Tokyo")
    page.allow("/schedules")  # the 400 the bad cron provokes on purpose
    form.get_by_role("button", name="Create schedule").click()
    expect(form.locator('[data-error-for="cron"]')).to_contain_text("not a valid cron")
    shoot(p, "schedules-new")
    assert api.get("/api/schedules").json() == []

    form.get_by_label("Cron expression").fill("0 9 * * 1-5")
    form.get_by_role("button", name="Create schedule").click()
    row = p.locator("tr[data-schedule]", has_text="朝のまとめ")
    expect(row).to_be_visible()
    (made,) = api.get("/api/schedules").json()
    assert made["agentId"] == hanako["id"]
    assert made["cron"] == "0 9 * * 1-5"
    assert made["timezone"] == "Asia/Tokyo"
    assert made["createdBy"].startswith("api:")  # made through the REST API, as the page does

    row.get_by_role("button", name="Run now").click()
    wait_for(
        "the run to succeed",
        lambda: [
            r
            for r in api.get(f"/api/schedules/{made['id']}/runs").json()
            if r["status"] == "succeeded"
        ],
    )
    p.reload()
    run = p.locator("tr[data-run]", has_text="朝のまとめ")
    expect(run).to_contain_text("succeeded")
    expect(run).to_contain_text("本日の要約")
    expect(run.get_by_role("link", name="session")).to_be_visible()

    row.get_by_role("button", name="Pause").click()
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    assert api.get(f"/api/schedules/{made['id']}").json()["paused"] is True

    # a post to a gateway this server does not run fails, and waits for a person
    post = api.post(
        "/api/agents/aki/schedules",
        json={
            "everySecs": 3600,
            "name": "Friday note",
            "action": {
                "kind": "post",
                "prompt": "Say hi",
                "home": {"gateway": "discord", "channel": "42"},
            },
        },
    ).json()
    assert api.post(f"/api/schedules/{post['id']}/run-now").status_code == 202
    wait_for("the post to fail", lambda: api.get("/api/schedule-runs/failed").json())
    p.reload()
    failed = p.locator("[data-failed-run]")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("discord gateway is not running")
    shoot(p, "schedules")
    failed.get_by_role("button", name="Acknowledge").click()
    expect(p.locator("[data-failed-run]")).to_have_count(0)
    assert api.get("/api/schedule-runs/failed").json() == []
