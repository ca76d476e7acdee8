"""Notifications of new inbox items (issue 37, section 2): one message per batch, sent once.

Every `[inbox] batch_secs` the notifier reads the inbox (reports/inbox.py) and records
the items it has not seen (store/repositories/inbox.py `notice`): an item's row is
inserted by one process only, so of several processes on one database exactly one
sends it. What this process inserted in one look is one batch — a burst of twenty held
calls is one message — sent to each configured outlet:

- the webhook `[inbox] webhook_url`: a JSON body signed with HMAC-SHA256 (inbox/webhook.py;
  the secret from the environment variable `[inbox] webhook_secret_env`, else the one
  stored encrypted with `PUT /api/inbox/webhook-secret`);
- the gateway channel `[budgets] alert_outlet` (any running chat gateway): a few lines of text,
  budget alerts left out (core/budgets.py writes each there at once).

Both carry the items' summaries, cut short, and a link into the inbox; never the secret,
an approval's arguments or a question's whole text. Sending runs in the notifier's own
task with timeouts, so a failing or hanging receiver holds up nothing else; how it went
is recorded per item (`GET /api/inbox/deliveries`, the Inbox page's banner). A process
that died while sending leaves rows `sending`; another takes them over after the lease
time and sends them if they still wait. A process where the alert outlet's gateway does
not run leaves the batch to one where it does.

Example:
    notifier = InboxNotifier(runtime)
    await notifier.tick()      # claims and sends what is new; returns the batch
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opencrab.config.models import InboxSection
from opencrab.core.runtime import Runtime
from opencrab.inbox import webhook
from opencrab.inbox.secret import webhook_secret
from opencrab.messages import MessageContent, OutgoingMessage, Outlet
from opencrab.offload import run_blocking
from opencrab.reports.inbox import SOURCES, InboxItem, as_noticed, collect, outlets_of
from opencrab.store.leases import PROCESS_OWNER
from opencrab.store.repositories import inbox as repo

log = logging.getLogger(__name__)

BODY_ITEMS = 50
"""Items listed in a webhook body at most (`more` counts the rest)."""
TEXT_ITEMS = 10
"""Items listed in a chat message at most."""
BODY_SUMMARY = 200
TEXT_SUMMARY = 120


@dataclass(frozen=True)
class Batch:
    """What one look sent: the items and, per outlet, why it failed (None: it went)."""

    items: list[InboxItem]
    errors: dict[str, str | None]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def base_url(runtime: Runtime) -> str:
    """The dashboard's address for links: `[inbox] public_url`, else the server's own."""
    given = runtime.settings.inbox.public_url
    if given:
        return given.rstrip("/")
    rest = runtime.settings.gateway.rest
    unspecified = ipaddress.ip_address(rest.host).is_unspecified if _ip(rest.host) else False
    host = "127.0.0.1" if unspecified or not rest.host else rest.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{rest.port}"


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def webhook_body(items: list[InboxItem], base: str, now: datetime) -> bytes:
    """The webhook's JSON: how many, the first BODY_ITEMS items' short form, the link."""
    listed = [
        {
            "id": item.id,
            "kind": item.kind,
            "agentId": item.agent_id,
            "agent": item.agent,
            "createdAt": item.created_at.isoformat(),
            "summary": _cut(item.summary, BODY_SUMMARY),
            "link": f"{base}{item.link}",
        }
        for item in items[:BODY_ITEMS]
    ]
    body = {
        "event": "inbox.items",
        "count": len(items),
        "more": max(0, len(items) - BODY_ITEMS),
        "items": listed,
        "inboxUrl": f"{base}/inbox",
        "sentAt": now.isoformat(),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def chat_text(items: list[InboxItem], base: str) -> str:
    """The chat message: a heading, one line per item (TEXT_ITEMS at most), the link."""
    heading = "1 item waits" if len(items) == 1 else f"{len(items)} items wait"
    lines = [f"OpenCrab inbox: {heading} for a person."]
    for item in items[:TEXT_ITEMS]:
        who = f"{item.agent}: " if item.agent else ""
        lines.append(f"- [{item.kind}] {who}{_cut(item.summary, TEXT_SUMMARY)}")
    if len(items) > TEXT_ITEMS:
        lines.append(f"… and {len(items) - TEXT_ITEMS} more")
    lines.append(f"Open the inbox: {base}/inbox")
    return "\n".join(lines)


class InboxNotifier:
    """See the module docstring. `run()` until `stop()`, or `tick()` once."""

    def __init__(self, runtime: Runtime, *, owner: str = PROCESS_OWNER) -> None:
        self.runtime = runtime
        self.owner = owner
        self._stopping = asyncio.Event()
        self.sent = 0
        self.failed = 0

    @property
    def section(self) -> InboxSection:
        """The `[inbox]` settings."""
        return self.runtime.settings.inbox

    def can_send_here(self) -> bool:
        """False when the alert outlet's gateway does not run in this process (a process
        where it does sends the batch instead)."""
        where = self.runtime.settings.budgets.alert_outlet
        return where is None or where.gateway in self.runtime.outlets

    async def tick(self) -> Batch | None:
        """Claim what is new (and what a dead process left `sending`) and send it as one
        batch; None when nothing was new or nothing is configured."""
        if not outlets_of(self.runtime) or not self.can_send_here():
            return None
        items = await run_blocking(collect, self.runtime, None, list(SOURCES))
        mine = await run_blocking(self._claim, items)
        if not mine:
            return None
        batch = [item for item in items if item.id in mine]
        errors = await self.send(batch)
        failed = {name: why for name, why in errors.items() if why is not None}
        error = "; ".join(failed.values()) if failed else None
        status: repo.NotifyStatus = "failed" if failed else "sent"
        await run_blocking(self._finish, list(mine), status, error)
        if failed:
            self.failed += len(batch)
            log.warning("inbox notification of %d item(s) failed: %s", len(batch), error)
        else:
            self.sent += len(batch)
        return Batch(batch, errors)

    def _claim(self, items: list[InboxItem]) -> set[str]:
        now = datetime.now(UTC)
        stale = now - timedelta(seconds=self.runtime.settings.database.lease_ttl_secs)
        waiting = {item.id for item in items}
        with self.runtime.db.write() as conn:
            mine = set(repo.notice(conn, as_noticed(items), self.owner, now))
            taken = repo.reclaim(conn, self.owner, now, stale)
            gone = [row.key for row in taken if row.key not in waiting]
            repo.finish(conn, gone, "quiet", None, now)  # no longer waits: nothing to say
        return mine | {row.key for row in taken if row.key in waiting}

    def _finish(self, keys: list[str], status: repo.NotifyStatus, error: str | None) -> None:
        with self.runtime.db.write() as conn:
            repo.finish(conn, keys, status, error, datetime.now(UTC))

    async def send(self, items: list[InboxItem]) -> dict[str, str | None]:
        """Send the batch to every configured outlet at once; per outlet, why it failed."""
        base = base_url(self.runtime)
        jobs: dict[str, asyncio.Task[str | None]] = {}
        if self.section.webhook_url:
            jobs["webhook"] = asyncio.create_task(self._webhook(items, base))
        where = self.runtime.settings.budgets.alert_outlet
        if where is not None:
            chat = [i for i in items if i.kind != "budget_alert"]  # budgets wrote those there
            if chat:
                jobs[where.gateway] = asyncio.create_task(self._chat(chat, base))
        return {name: await job for name, job in jobs.items()}

    async def _webhook(self, items: list[InboxItem], base: str) -> str | None:
        url = self.section.webhook_url
        assert url is not None
        secret = await run_blocking(webhook_secret, self.runtime)
        if secret is None:
            return (
                f"webhook: no signing secret (set {self.section.webhook_secret_env}, or "
                "PUT /api/inbox/webhook-secret)"
            )
        body = webhook_body(items, base, datetime.now(UTC))
        return await webhook.post(url, body, secret, self.section.webhook_timeout_secs)

    async def _chat(self, items: list[InboxItem], base: str) -> str | None:
        where = self.runtime.settings.budgets.alert_outlet
        assert where is not None
        outlet = self.runtime.outlets.get(where.gateway)
        if outlet is None:
            return f"{where.gateway}: the gateway is not running"
        target = Outlet(gateway=where.gateway, channel=where.channel).target()
        waiting = [
            {"kind": item.kind, "subjectId": item.subject_id, "summary": item.summary}
            for item in items
        ]
        message = OutgoingMessage(
            content=MessageContent(text=chat_text(items, base)),
            target=target,
            metadata={"inbox": waiting},  # a gateway with buttons offers them per item
        )
        try:
            async with asyncio.timeout(self.section.webhook_timeout_secs * 2):
                await outlet.send(message)
        except TimeoutError:
            return f"{where.gateway}: timed out"
        except Exception as exc:  # a closed gateway, a missing channel, the platform's answer
            return f"{where.gateway}: {type(exc).__name__}"
        return None

    async def run(self) -> None:
        """Look every `[inbox] batch_secs` until `stop()`; a failed look is logged."""
        while not self._stopping.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("inbox notifications: a look failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.section.batch_secs)

    def stop(self) -> None:
        self._stopping.set()
