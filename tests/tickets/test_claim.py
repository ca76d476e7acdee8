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

from opencrab.config import Settings, load_settings
from opencrab.config.models import TicketsSection
from opencrab.core import recorder
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import LeaseStore, ticket_key
from opencrab.tickets import service
from opencrab.tickets.scheduler import TicketScheduler
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.server.local import LocalClient
from tests.tickets.conftest import openai_tool_reply, wait_for

OTHER = "another-machine:1:x.other"  # a live process elsewhere (not this machine's pid)


@pytest.fixture
def agent_id(any_db: Database, settings: Settings) -> str:
    return AgentStore(any_db, settings).create(AgentCreate(name="aki", prompt="Work.")).id


BEGAN = "(transaction)"


@contextmanager
def statements(db: Database) -> Iterator[list[tuple[int, str]]]:
    """The SQL statements run on `db` inside the block, one entry per execute call, and
    BEGAN where each transaction began; each with its connection's id."""
    seen: list[tuple[int, str]] = []

    def note(conn: Any, _: Any, statement: str, *rest: Any) -> None:
        seen.append((id(conn), " ".join(statement.split())))

    def began(conn: Any) -> None:
        seen.append((id(conn), BEGAN))

    sa.event.listen(db.engine, "before_cursor_execute", note)
    sa.event.listen(db.engine, "begin", began)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)
        sa.event.remove(db.engine, "begin", began)


def transactions(seen: list[tuple[int, str]]) -> list[list[str]]:
    """`seen` cut into its transactions, each as its statements in order."""
    found: list[list[str]] = []
    current: dict[int, list[str]] = {}
    for conn, statement in seen:
        if statement == BEGAN or conn not in current:
            current[conn] = []
            found.append(current[conn])
        if statement != BEGAN:
            current[conn].append(statement)
    return found


def lease_writes(seen: list[tuple[int, str]]) -> list[list[str]]:
    """The transactions among `seen` that change lease rows, each as its statements."""
    return [
        t
        for t in transactions(seen)
        if any(s.split(" ")[0] in ("INSERT", "UPDATE", "DELETE") and " leases " in s for s in t)
    ]


class Recording(TicketScheduler):
    """The real claiming, with each claimed ticket's run only noted (no model turns)."""

    def __init__(self, runtime: Any, section: TicketsSection) -> None:
        super().__init__(runtime, section)
        self.ran: list[str] = []

    async def run_ticket(self, ticket_id: str) -> None:
        self.ran.append(ticket_id)


def claim_once(
    db: Database, concurrency: int
) -> tuple[list[str], list[tuple[int, str]], list[str]]:
    """One claim by a scheduler with room for `concurrency`: the tickets it claimed, the
    statements the claim ran, and the tickets whose runs then began."""

    async def run() -> tuple[list[str], list[tuple[int, str]], list[str]]:
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
    assert [s for _, s in seen].count(BEGAN) == 1, seen

    again = service.begin_run(any_db, ticket.id)  # running already: read, not started again
    assert not again.started
    assert again.ticket == begun.ticket


def test_a_steps_transaction_writes_the_shared_daily_rollups_last(
    settings: Settings,
    any_db: Database,
    fake_llm_server: FakeLlmServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every turn's calls add to the same daily rollup rows (one per day, agent, model):
    written last in their step's transaction, their row locks are held only until the
    commit, so concurrent tickets' steps do not queue behind each other's other writes
    (here the ticket's move, which the complete_ticket call makes in that transaction).
    The model is the fake OpenAI server: its replies carry usage, so calls are recorded."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    monkeypatch.setenv("OPENCRAB_TICKETS__POLL_SECS", "0.05")
    fake_llm_server.reply(
        "/v1/chat/completions",
        Reply(json=openai_tool_reply(("complete_ticket", {"summary": "done"}))),
    )
    with (
        statements(any_db) as seen,
        LocalClient(create_app(load_settings(), any_db, tickets=True)) as api,
    ):

        def noting(what: str, write: Any) -> Any:
            def wrapped(conn: Any, *args: Any, **kwargs: Any) -> Any:
                seen.append((id(conn), what))
                return write(conn, *args, **kwargs)

            return wrapped

        for module, name in ((recorder, "insert_records"), (recorder, "queue_messages")):
            monkeypatch.setattr(module, name, noting(name, getattr(module, name)))
        monkeypatch.setattr(service, "move_in", noting("move_in", service.move_in))
        made = api.post("/api/agents", json={"name": "aki", "prompt": "Work on tickets."})
        assert made.status_code == 201, made.text
        ticket = api.post("/api/tickets", json={"agentId": made.json()["id"]})
        assert ticket.status_code == 201, ticket.text
        wait_for(
            "the ticket to complete",
            lambda: service.get_ticket(any_db, ticket.json()["id"]).status == "completed",
        )
    noted = ("insert_records", "queue_messages", "move_in")
    steps = [[w for w in t if w in noted] for t in transactions(seen)]
    with_rollups = [t for t in steps if "insert_records" in t]
    assert with_rollups, "no step recorded the model's calls"
    assert all(t[-1] == "insert_records" for t in with_rollups), with_rollups
    assert any("move_in" in t for t in with_rollups), with_rollups  # the case that matters


def test_taking_a_free_lease_on_postgresql_is_four_statements_in_its_write(
    any_db: Database,
) -> None:
    """A ticket's or a turn's lease is a new row: its write sets the lock timeout and
    reads the clock in one statement, and the renewing UPDATE returns what it renewed
    (no second read); then the expired rows' UPDATE and the INSERT."""
    store = LeaseStore(any_db)
    with statements(any_db) as seen:
        assert store.try_acquire("turn:a", "me", 30)
    [write] = lease_writes(seen)
    if any_db.dialect == "postgresql":
        assert len(write) == 4, write
        assert "set_config" in write[0], write
        assert "clock_timestamp" in write[0], write
    with statements(any_db) as seen:  # taking it again renews it, in one statement less
        assert store.try_acquire("turn:a", "me", 30)
    if any_db.dialect == "postgresql":
        [write] = lease_writes(seen)
        assert len(write) == 2, write  # the lock timeout and clock, the renewal
    assert store.get("turn:a") is not None


def test_after_a_turn_the_ticket_is_read_in_one_statement(any_db: Database, agent_id: str) -> None:
    """What the scheduler reads after each turn (its status and current session) agrees
    with the whole ticket's, in one statement, for a pending, a running and a deleted one."""
    ticket = service.create_ticket(any_db, agent_id, context={"goal": "g"})
    pending = service.ticket_state(any_db, ticket.id)
    assert pending is not None
    assert (pending.status, pending.current_session_id) == ("pending", None)
    began = service.begin_run(any_db, ticket.id).ticket
    with statements(any_db) as seen:
        running = service.ticket_state(any_db, ticket.id)
    ran = [s for _, s in seen if s != BEGAN]
    assert len(ran) == 1, ran
    assert running is not None
    assert (running.status, running.current_session_id) == ("running", began.current_session_id)
    service.reset_ticket(any_db, ticket.id)  # pending again: its old session is no longer current
    assert service.ticket_state(any_db, ticket.id) == pending
    service.delete_ticket(any_db, ticket.id)
    assert service.ticket_state(any_db, ticket.id) is None
