"""`/api/gateways`: chat-platform gateways configured and restarted over HTTP, against a
fake Slack (tests/fakes/slack_server.py) on its own loop; the server keeps running."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.slack_server import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    FakeSlack,
    fake_slack_in_thread,
)
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient


def until(check: Callable[[], Any], *, timeout: float = 60) -> Any:
    """Until `check()` returns something true (looked at every 20 ms); that value."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)
    return found


def slack_of(client: LocalClient) -> dict[str, Any]:
    response = client.get("/api/gateways/slack")
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def served(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> Iterator[tuple[LocalClient, FakeSlack, Callable[[Any], Any]]]:
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with (
        fake_slack_in_thread() as (fake, run),
        LocalClient(create_app(settings, db, router=router, gateways=True)) as client,
    ):
        yield client, fake, run


def good(fake: FakeSlack, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "api_url": fake.api_url,
        "allow_users": ["U0MINA"],
        "ping_interval_secs": 0.2,
        "retry_first_secs": 0.05,
        "retry_cap_secs": 0.2,
        **extra,
    }


def test_gateways_are_listed_with_their_fields_and_bad_settings_are_refused(
    served: tuple[LocalClient, FakeSlack, Callable[[Any], Any]], db: Database
) -> None:
    client, fake, _ = served
    listed = {g["name"]: g for g in client.get("/api/gateways").json()}
    assert {"discord", "slack"} <= set(listed)
    assert not {"rest", "cli", "openai_compat"} & set(listed)
    slack = listed["slack"]
    assert slack["enabled"] is False
    assert slack["running"] is False
    assert slack["link"] is None
    assert slack["values"]["bot_token"] is None
    kinds = {f["name"]: f for f in slack["fields"]}
    assert kinds["bot_token"]["kind"] == "secret"
    assert kinds["mode"] == {
        "name": "mode",
        "kind": "choice",
        "choices": ["socket", "events"],
        "default": "socket",
    }
    assert kinds["allow_users"]["kind"] == "list"
    assert kinds["channel_agents"]["kind"] == "map"
    assert kinds["max_concurrent"]["kind"] == "number"

    for body, named in [
        ({"nope": 1}, "nope: unknown key for the slack gateway"),
        ({"max_concurrent": 0}, "max_concurrent:"),
        ({"mode": "carrier-pigeon"}, "mode:"),
        ({"allow_users": "everyone"}, "allow_users:"),
        ({"bot_token": 12}, "bot_token: a secret is text"),
    ]:
        message = error_of(
            client.put("/api/gateways/slack", json={"settings": body}), 400, "validation_error"
        )
        assert message.startswith(named), message
    error_of(client.get("/api/gateways/rest"), 404, "not_found")
    error_of(client.put("/api/gateways/nowhere", json={"settings": {}}), 404, "not_found")
    with db.read() as conn:
        assert conn.execute(sa.text("select count(*) from gateway_settings")).scalar() == 0

    saved = client.put("/api/gateways/slack", json={"settings": good(fake)})
    assert saved.status_code == 200, saved.text
    values = saved.json()["values"]
    assert values["bot_token"] == "…" + BOT_TOKEN[-4:]
    assert values["app_token"] == "…" + APP_TOKEN[-4:]
    assert values["allow_users"] == ["U0MINA"]
    assert saved.json()["fromDashboard"] == sorted(good(fake))
    with db.read() as conn:
        stored = conn.execute(sa.text("select * from gateway_settings")).mappings().one()
    assert BOT_TOKEN not in str(dict(stored))
    assert APP_TOKEN not in str(dict(stored))

    again = client.put("/api/gateways/slack", json={"settings": {**good(fake), "bot_token": None}})
    assert again.json()["values"]["bot_token"] == "…" + BOT_TOKEN[-4:]  # kept
    removed = client.put("/api/gateways/slack", json={"settings": {**good(fake), "app_token": ""}})
    assert removed.json()["values"]["app_token"] is None


def test_saved_settings_start_slack_and_a_restart_reconnects_it_alone(
    served: tuple[LocalClient, FakeSlack, Callable[[Any], Any]], scripted: ScriptedProvider
) -> None:
    client, fake, run = served
    new_agent(client)
    scripted.then(reply("Hello from the dashboard's Slack."))
    assert client.put("/api/gateways/slack", json={"settings": good(fake)}).status_code == 200
    started = client.post("/api/gateways/slack/restart")
    assert started.status_code == 200, started.text
    assert started.json()["running"] is True
    until(lambda: (slack_of(client)["link"] or {}).get("state") == "connected")

    mention = {
        "type": "app_mention",
        "user": "U0MINA",
        "text": f"<@{BOT_USER}> hello",
        "ts": "1.1",
        "channel": "C0GARDEN",
    }
    run(fake.push("events_api", fake.event(mention)))
    until(lambda: fake.posted)
    assert fake.posted[0]["text"] == "Hello from the dashboard's Slack."
    assert fake.posted[0]["thread_ts"] == "1.1"

    wrong = {"settings": good(fake, app_token="xapp-not-the-right-one")}
    assert client.put("/api/gateways/slack", json=wrong).status_code == 200
    assert client.post("/api/gateways/slack/restart").status_code == 200
    link = until(
        lambda: (
            (slack_of(client)["link"] or {}).get("state") == "retrying" and slack_of(client)["link"]
        )
    )
    assert "invalid_auth" in link["error"]
    assert link["retryIn"] is not None
    assert "xapp-not" not in str(link)
    assert client.get("/api/health").status_code == 200  # the server carries on

    assert client.put("/api/gateways/slack", json={"settings": good(fake)}).status_code == 200
    client.post("/api/gateways/slack/restart")
    until(lambda: (slack_of(client)["link"] or {}).get("state") == "connected")
    assert fake.connections == 2

    off = client.put("/api/gateways/slack", json={"settings": {**good(fake), "enabled": False}})
    assert off.status_code == 200
    stopped = client.post("/api/gateways/slack/restart").json()
    assert stopped["running"] is False
    assert stopped["enabled"] is False


def test_a_setting_that_cannot_start_says_why_and_leaves_the_rest(
    served: tuple[LocalClient, FakeSlack, Callable[[Any], Any]],
) -> None:
    client, fake, _ = served
    new_agent(client)
    new_agent(client, name="kai")  # two agents: the gateway must name one
    assert client.put("/api/gateways/slack", json={"settings": good(fake)}).status_code == 200
    message = error_of(client.post("/api/gateways/slack/restart"), 400, "validation_error")
    assert "slack did not start" in message
    assert "agent" in message
    view = slack_of(client)
    assert view["running"] is False
    assert "agent" in view["error"]
    fixed = client.put("/api/gateways/slack", json={"settings": good(fake, agent="kai")})
    assert fixed.status_code == 200
    assert client.post("/api/gateways/slack/restart").json()["running"] is True
    assert slack_of(client)["error"] is None


def test_a_key_the_config_sets_wins_and_is_read_only(
    monkeypatch: pytest.MonkeyPatch, data_dir: Any, db: Database, scripted: ScriptedProvider
) -> None:
    monkeypatch.setenv("OPENCRAB_GATEWAY__SLACK__SLASH_COMMAND", "/garden")
    settings = load_settings()
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as client:
        view = slack_of(client)
        assert view["fromFile"] == ["slash_command"]
        assert view["values"]["slash_command"] == "/garden"
        message = error_of(
            client.put("/api/gateways/slack", json={"settings": {"slash_command": "/other"}}),
            400,
            "validation_error",
        )
        assert message.startswith("slash_command: set in the config file")
        same = {"slash_command": "/garden", "allow_channels": ["C0GARDEN"]}
        saved = client.put("/api/gateways/slack", json={"settings": same})
        assert saved.status_code == 200, saved.text
        assert saved.json()["fromDashboard"] == ["allow_channels"]
        assert saved.json()["values"]["allow_channels"] == ["C0GARDEN"]
        # this process runs no chat gateways (create_app without gateways)
        error_of(client.post("/api/gateways/slack/restart"), 400, "validation_error")
