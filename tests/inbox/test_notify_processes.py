"""Three `opencrab worker` processes on one PostgreSQL notify of every new inbox item
exactly once: each item is in one signed webhook body, never two."""

from __future__ import annotations

import time
from pathlib import Path

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore, HeartbeatConfig
from opencrab.store import Database
from opencrab.store.tables import inbox_items
from tests.fakes.inbox_items import ask
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab
from tests.fakes.webhook_receiver import WebhookReceiver

SECRET = "three-processes-one-secret"
BURSTS = 4
PER_BURST = 5


def wait_until(what: str, done: object, secs: float = 120) -> None:
    deadline = time.monotonic() + secs
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_workers_on_postgresql_notify_each_item_once(
    pg_url: str, settings: Settings, data_dir: Path, fake_llm_server: FakeLlmServer
) -> None:
    db = Database(pg_url)
    db.upgrade()
    receiver = WebhookReceiver(SECRET)
    try:
        agent = AgentStore(db, settings).create(
            AgentCreate(name="aki", heartbeat=HeartbeatConfig(enabled=False))
        )
        with receiver.serving() as url:
            env = {
                "OPENCRAB_DATABASE__URL": pg_url,
                "OPENCRAB_INBOX__WEBHOOK_URL": url,
                "OPENCRAB_INBOX__BATCH_SECS": "0.2",
                "OPENCRAB_INBOX_WEBHOOK_SECRET": SECRET,
                "OPENCRAB_TICKETS__ENABLED": "false",  # the asked tickets stay as asked
            }
            workers = [
                ServedOpenCrab(data_dir / f"w{i}", llm=fake_llm_server, env=env, worker=True)
                for i in range(3)
            ]
            try:
                for worker in workers:
                    worker.start()
                made = []
                for burst in range(BURSTS):
                    made += [
                        ask(db, agent.id, f"burst {burst} question {n}")[0]
                        for n in range(PER_BURST)
                    ]

                    def told(count: int = len(made)) -> bool:
                        ids = [i["id"] for r in receiver.received for i in r.json["items"]]
                        return len(set(ids)) >= count

                    wait_until(f"burst {burst} to be told", told)

                def settled() -> bool:
                    with db.read() as conn:
                        statuses = conn.execute(inbox_items.select()).all()
                    return len(statuses) == len(made) and all(
                        r.notify_status == "sent" for r in statuses
                    )

                wait_until("every row to be sent", settled)
            finally:
                for worker in workers:
                    worker.stop()
        ids = [i["id"] for r in receiver.received for i in r.json["items"]]
        assert sorted(ids) == sorted(f"ticket_question:{t}" for t in made)  # each once
        assert all(r.valid for r in receiver.received)
        assert len(receiver.received) <= len(made)  # batched, never one call per item more
        with db.read() as conn:
            owners = {r.notify_owner for r in conn.execute(inbox_items.select())}
        assert owners  # claimed by the workers' rows (which of them does not matter)
    finally:
        db.close()
