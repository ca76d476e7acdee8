"""Inbox notifications (opencrab/inbox/notifier.py) on SQLite and PostgreSQL, to a real
webhook receiver on 127.0.0.1 that checks the signature, and to a chat gateway: a burst
is one message, sent once however many processes look; a failing or hanging webhook is
recorded, shown, and holds up neither the other outlet nor the next look."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from opencrab.config import Settings
from opencrab.config.models import AlertOutlet, InboxSection
from opencrab.core.agent import AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.inbox.notifier import InboxNotifier
from opencrab.reports.inbox import deliveries, notify_setting
from opencrab.schedules.service import create_schedule
from opencrab.schedules.spec import parse_input
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories import schedules as schedules_repo
from opencrab.store.repositories.schedules import RunEnd
from tests.fakes.chat_gateway import MemoryChat
from tests.fakes.inbox_items import ask, spend_row
from tests.fakes.ports import closed_port
from tests.fakes.webhook_receiver import WebhookReceiver

SECRET = "a-long-shared-secret-for-tests"


@pytest.fixture
async def runtime(settings: Settings, any_db: Database) -> AsyncIterator[Runtime]:
    async with Runtime.open(settings, db=any_db) as rt:
        yield rt


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENCRAB_INBOX_WEBHOOK_SECRET", SECRET)
    return SECRET


def configure(runtime: Runtime, url: str | None, timeout: float = 5.0) -> None:
    runtime.settings.inbox = InboxSection(
        webhook_url=url, webhook_timeout_secs=timeout, public_url="https://crab.example"
    )


async def test_a_burst_is_one_signed_message_sent_once(runtime: Runtime, secret: str) -> None:
    receiver = WebhookReceiver(secret)
    aki = runtime.agents.create(AgentCreate(name="aki"))
    with receiver.serving() as url:
        configure(runtime, url)
        tickets = [ask(runtime.db, aki.id, f"Question {n}: ship it?")[0] for n in range(3)]
        two = [InboxNotifier(runtime, owner="process-a"), InboxNotifier(runtime, owner="b")]
        batches = await asyncio.gather(*(n.tick() for n in two))
        sent = [b for b in batches if b is not None]
        assert len(sent) == 1  # one process owns the burst
        assert [i.id for i in sent[0].items] == [f"ticket_question:{t}" for t in reversed(tickets)]
        assert sent[0].errors == {"webhook": None}
        [got] = receiver.wait_for(1)
        assert got.valid
        body = got.json
        assert (body["event"], body["count"], body["more"]) == ("inbox.items", 3, 0)
        assert body["inboxUrl"] == "https://crab.example/inbox"
        assert {i["kind"] for i in body["items"]} == {"ticket_question"}
        assert body["items"][0]["link"] == f"https://crab.example/tickets/{tickets[-1]}"
        assert body["items"][0]["summary"] == "Question 2: ship it?"
        assert SECRET.encode() not in got.body

        assert [await n.tick() for n in two] == [None, None]  # nothing new: nothing sent
        later, _ = ask(runtime.db, aki.id, "One more?")
        batch = await two[1].tick()
        assert batch is not None
        assert [i.id for i in batch.items] == [f"ticket_question:{later}"]
        assert receiver.wait_for(2)[1].json["count"] == 1
    assert len(receiver.received) == 2
    assert all(r.valid for r in receiver.received)
    shown = await deliveries(runtime, failed_only=False, limit=10)
    assert {d.status for d in shown} == {"sent"}
    assert len(shown) == 4


async def test_a_tampered_or_old_signature_does_not_verify(secret: str) -> None:
    from opencrab.inbox.webhook import signed, verify

    body, headers = signed(b'{"count":1}', secret, now=1_767_225_600)
    assert verify(body, headers, secret, now=1_767_225_610)
    assert not verify(b'{"count":2}', headers, secret, now=1_767_225_610)
    assert not verify(body, headers, "another-secret", now=1_767_225_610)
    assert not verify(body, headers, secret, now=1_767_225_600 + 3600)  # a replay


async def test_a_failing_webhook_is_recorded_and_the_gateway_still_told(
    runtime: Runtime, secret: str
) -> None:
    chat = MemoryChat()
    runtime.outlets["memchat"] = chat
    runtime.settings.budgets.alert_outlet = AlertOutlet(gateway="memchat", channel="C9")
    receiver = WebhookReceiver(secret, mode="fail")
    aki = runtime.agents.create(AgentCreate(name="aki"))
    with receiver.serving() as url:
        configure(runtime, url)
        ticket, _ = ask(runtime.db, aki.id, "Which branch?")
        batch = await InboxNotifier(runtime).tick()
        assert batch is not None
        assert batch.errors == {"webhook": "webhook: HTTP 500", "memchat": None}
    assert receiver.received[0].valid
    [message] = chat.sent
    assert message.target.channel_id == "C9"
    text = message.content.text
    assert text.splitlines() == [
        "OpenCrab inbox: 1 item waits for a person.",
        "- [ticket_question] aki: Which branch?",
        "Open the inbox: https://crab.example/inbox",
    ]
    assert SECRET not in text
    setting = await asyncio.to_thread(notify_setting, runtime)
    assert setting.outlets == ["webhook", "memchat"]
    assert setting.last_failure is not None
    assert setting.last_failure.item_id == f"ticket_question:{ticket}"
    assert setting.last_failure.error == "webhook: HTTP 500"
    assert url not in str(setting.model_dump())


async def test_a_hanging_or_unreachable_webhook_times_out(runtime: Runtime, secret: str) -> None:
    receiver = WebhookReceiver(secret, mode="hang")
    aki = runtime.agents.create(AgentCreate(name="aki"))
    with receiver.serving() as url:
        configure(runtime, url, timeout=0.5)
        ask(runtime.db, aki.id, "Still there?")
        other = asyncio.create_task(asyncio.sleep(0))  # the loop is free meanwhile
        batch = await InboxNotifier(runtime).tick()
        await other
        assert batch is not None
        assert batch.errors["webhook"] in ("webhook: timed out", "webhook: ReadTimeout")
        assert receiver.arrived.is_set()
    configure(runtime, f"http://127.0.0.1:{closed_port()}/hook", timeout=2)
    ask(runtime.db, aki.id, "And now?")
    batch = await InboxNotifier(runtime).tick()
    assert batch is not None
    assert batch.errors == {"webhook": "webhook: ConnectError"}
    failed = await deliveries(runtime, failed_only=True, limit=10)
    assert len(failed) == 2


async def test_no_secret_no_webhook_and_the_failure_says_what_to_set(
    runtime: Runtime, data_dir: Path
) -> None:
    receiver = WebhookReceiver(SECRET)
    aki = runtime.agents.create(AgentCreate(name="aki"))
    with receiver.serving() as url:
        configure(runtime, url)
        ask(runtime.db, aki.id, "Anyone?")
        batch = await InboxNotifier(runtime).tick()
    assert batch is not None
    assert batch.errors["webhook"] == (
        "webhook: no signing secret (set OPENCRAB_INBOX_WEBHOOK_SECRET, or "
        "PUT /api/inbox/webhook-secret)"
    )
    assert receiver.received == []


async def test_nothing_is_claimed_without_an_outlet_or_where_the_gateway_is_missing(
    runtime: Runtime, secret: str
) -> None:
    aki = runtime.agents.create(AgentCreate(name="aki"))
    ask(runtime.db, aki.id, "Hello?")
    assert await InboxNotifier(runtime).tick() is None  # nothing configured
    runtime.settings.budgets.alert_outlet = AlertOutlet(gateway="memchat", channel="C9")
    assert await InboxNotifier(runtime).tick() is None  # its gateway does not run here
    chat = MemoryChat()
    runtime.outlets["memchat"] = chat
    batch = await InboxNotifier(runtime).tick()  # a process where it runs sends it
    assert batch is not None
    assert len(chat.sent) == 1


async def test_a_spend_alarm_and_a_failed_schedule_run_reach_both_outlets(
    runtime: Runtime, secret: str
) -> None:
    """Section 3's alarms and section 1's failed runs are delivered through the inbox's
    outlets like its other items (a budget alert goes to the chat by the budgets)."""
    chat = MemoryChat()
    runtime.outlets["memchat"] = chat
    runtime.settings.budgets.alert_outlet = AlertOutlet(gateway="memchat", channel="C9")
    night = runtime.agents.create(AgentCreate(name="night"))
    now = datetime.now(UTC)
    with runtime.db.write() as conn:  # $0.90 on its own today, nobody talked to it
        metrics_repo.insert(conn, [spend_row(night.id, now, 0.9, "heartbeat")])
    given = parse_input(
        {"cron": "0 0 1 1 *", "timezone": "UTC", "action": {"kind": "turn", "prompt": "Yearly"}}
    )
    schedule = create_schedule(runtime.db, runtime.settings, night.id, given, created_by="test")
    with runtime.db.write() as conn:
        run_id = schedules_repo.claim_slot(
            conn, schedule.id, now, trigger="manual", process="test", now=now
        )
        assert run_id is not None
        schedules_repo.finish_run(conn, run_id, RunEnd("failed", now, detail="HTTPError: 502"))
    receiver = WebhookReceiver(secret)
    with receiver.serving() as url:
        configure(runtime, url)
        batch = await InboxNotifier(runtime).tick()
        assert batch is not None
        assert batch.errors == {"webhook": None, "memchat": None}
        [got] = receiver.wait_for(1)
    assert got.valid
    kinds = {i["kind"]: i for i in got.json["items"]}
    assert set(kinds) == {"spend_alarm", "schedule_failure"}
    assert kinds["spend_alarm"]["id"] == f"spend_alarm:unattended:{night.id}:{now:%Y-%m-%d}"
    assert kinds["spend_alarm"]["link"] == "https://crab.example/budgets"
    assert kinds["schedule_failure"]["id"] == f"schedule_failure:{run_id}"
    assert kinds["schedule_failure"]["agent"] == "night"
    [message] = chat.sent
    lines = message.content.text.splitlines()
    assert lines[0] == "OpenCrab inbox: 2 items wait for a person."
    assert sorted(line.split("]")[0] for line in lines[1:3]) == [
        "- [schedule_failure",
        "- [spend_alarm",
    ]
    assert await InboxNotifier(runtime).tick() is None  # each is sent once


def test_bad_inbox_settings_are_refused_naming_the_key() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="batch_secs"):
        InboxSection(batch_secs=0)
    with pytest.raises(ValidationError, match="webhook_url"):
        InboxSection(webhook_url="ftp://example.org/hook")
    with pytest.raises(ValidationError, match="read as a setting"):
        InboxSection(webhook_secret_env="OPENCRAB_HOOK_SECRET")
    with pytest.raises(ValidationError, match="webhook_secret_env"):
        InboxSection(webhook_secret_env="BAD NAME")
    assert InboxSection(webhook_secret_env="HOOK_SECRET").webhook_secret_env == "HOOK_SECRET"
