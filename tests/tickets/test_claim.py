"""How the scheduler claims and begins tickets, counted in statements (not time), on
SQLite and PostgreSQL: however many tickets it has room for, their leases are taken in
one write (a lease another process holds leaves its room to the next ticket); and a
claimed pending ticket is read and started in one transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.config.models import TicketsSection
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore, ticket_key
from opencrab.tickets import service
from opencrab.tickets.scheduler import TicketScheduler

OTHER = "another-machine:1:x.other"  # a live process elsewhere (not this machine's pid)


@pytest.fixture
def agent_id(any_db: Database, settings: Settings) -> str:
    return AgentStore(any_db, settings).create(AgentCreate(name="aki", prompt="Work.")).id


@contextmanager
def statements(db: Database) -> Iterator[list[str]]:
    """The SQL statements run on `db` inside the block, one entry per execute call, and
    "(transaction)" where each transaction began."""
    seen: list[str] = []

    def note(*args: Any) -> None:
        seen.append(" ".join(str(args[2]).split()))

    def began(*_: Any) -> None:
        seen.append("(transaction)")

    sa.event.listen(db.engine, "before_cursor_execute", note)
    sa.event.listen(db.engine, "begin", began)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)
        sa.event.remove(db.engine, "begin", began)


def lease_writes(seen: list[str]) -> list[list[str]]:
    """The transactions among `seen` that change lease rows, each as its statements."""
    transactions: list[list[str]] = []
    for statement in seen:
        if statement == "(transaction)" or not transactions:
            transactions.append([])
        transactions[-1].append(statement)
    return [
        t
        for t in transactions
        if any(s.split(" ")[0] in ("INSERT", "UPDATE", "DELETE") and " leases " in s for s in t)
    ]


class Recording(TicketScheduler):
    """The real claiming, with each claimed ticket's run only noted (no model turns)."""

    def __init__(self, runtime: Any, section: TicketsSection) -> None:
        super().__init__(runtime, section)
        self.ran: list[str] = []

    async def run_ticket(self, ticket_id: str) -> None:
        self.ran.append(ticket_id)


def claim_once(db: Database, concurrency: int) -> tuple[list[str], list[str], list[str]]:
    """One claim by a scheduler with room for `concurrency`: the tickets it claimed, the
    statements the claim ran, and the tickets whose runs then began."""

    async def run() -> tuple[list[str], list[str], list[str]]:
        keeper = LeaseKeeper(LeaseStore(db), ttl_secs=30)
        runtime = SimpleNamespace(db=db, leases=keeper)
        scheduler = Recording(runtime, TicketsSection(concurrency=concurrency))
        with statements(db) as seen:
            claimed = await scheduler.claim()
        await asyncio.gather(*scheduler.running.values())
        return claimed, seen, scheduler.ran

    return asyncio.run(run())


def test_every_ticket_there_is_room_for_is_claimed_in_one_lease_write(
    any_db: Database, agent_id: str
) -> None:
    made = {service.create_ticket(any_db, agent_id, context={"goal": str(i)}).id for i in range(8)}
    claimed, seen, ran = claim_once(any_db, concurrency=8)
    assert set(claimed) == made
    assert sorted(ran) == sorted(claimed)
    assert len(lease_writes(seen)) == 1, lease_writes(seen)  # one for all eight


def test_leases_held_elsewhere_leave_their_room_to_other_tickets(
    any_db: Database, agent_id: str
) -> None:
    made = [service.create_ticket(any_db, agent_id, context={"goal": str(i)}).id for i in range(8)]
    held = set(made[:5])  # claimed by another process, not started yet: still pending
    assert LeaseStore(any_db).acquire([ticket_key(t) for t in held], OTHER, 60) == {
        ticket_key(t) for t in held
    }
    claimed, _, ran = claim_once(any_db, concurrency=3)
    assert sorted(claimed) == sorted(set(made) - held) == sorted(ran)


def test_a_claimed_pending_ticket_is_read_and_started_in_one_transaction(
    any_db: Database, agent_id: str
) -> None:
    ticket = service.create_ticket(any_db, agent_id, context={"goal": "g"})
    with statements(any_db) as seen:
        begun = service.begin_run(any_db, ticket.id)
    assert begun.started
    assert begun.ticket.status == "running"
    assert begun.ticket.current_session_id is not None
    assert begun.ticket == service.get_ticket(any_db, ticket.id)
    assert seen.count("(transaction)") == 1, seen

    again = service.begin_run(any_db, ticket.id)  # running already: read, not started again
    assert not again.started
    assert again.ticket == begun.ticket
