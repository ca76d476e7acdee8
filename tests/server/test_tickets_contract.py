"""schemathesis runs seed 002's own OpenAPI document (tests/fixtures/seed002/openapi.yaml)
against a live server: the ticket and session operations must answer with a status the
seed documents and a body matching its schemas; invalid input must be refused with a 4xx
(400, which the seed documents only on some operations), never a 5xx.

The store holds one agent and a ticket in each state with sessions, steps and messages;
generated requests are pointed at those ids half of the time, so they reach past the 404
of a random id. Chat and discussion sessions are not in the store: the seed knows only
ticket sessions (its SessionSummary requires a `ticketId`), so those lists stay ticket-only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.tickets import service
from tests.fakes.ports import free_port
from tests.fakes.seed_openapi import SeedContract

OPERATIONS = (
    "listTickets",
    "getTicket",
    "createTicket",
    "deleteTicket",
    "resumeTicket",
    "resetTicket",
    "listSessions",
    "getSession",
    "addMessage",
)
KNOWN: dict[str, list[str]] = {}
# Input the seed's schemas allow can still be refused: resume of a ticket that is not
# suspended (400, documented), a message to an ended session (400, documented).
CONFIG = schemathesis.Config.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404"]}}}
)
EXAMPLES = 30  # per operation and mode


def _stock(db: Database, agent_id: str) -> None:
    """A ticket in each status, with steps, sessions and messages."""
    tickets: list[str] = []
    sessions: list[str] = []
    for status in ("pending", "running", "suspended", "completed", "failed"):
        ticket = service.create_ticket(db, agent_id, params={"n": 1}, context={"goal": status})
        tickets.append(ticket.id)
        if status == "pending":
            continue
        session = service.start_ticket(db, ticket.id).current_session_id
        assert session is not None
        sessions.append(session)
        service.add_step(db, ticket.id, f"step of a {status} ticket")
        service.answer_ticket_session(db, session, "a person's note")
        if status == "suspended":
            service.suspend_ticket(db, ticket.id)
        elif status == "completed":
            service.complete_ticket(db, ticket.id)
        elif status == "failed":
            service.fail_ticket(db, ticket.id, "it broke")
    KNOWN.update(agent=[agent_id], ticket=tickets, session=sessions)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("seed002")
    config = load_settings(overrides={"data_dir": str(data)})
    db = Database(config.database_url)
    db.upgrade()
    agent = AgentStore(db, config).create(AgentCreate(name="probe", prompt="Be brief."))
    _stock(db, agent.id)
    app = create_app(config, db)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        threading.Event().wait(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def _known_ids(case: Any, pick: int | None, negative: bool) -> None:
    """Point ids at stored records (when `pick` is given; never for DELETE)."""
    if pick is None:
        return
    params = case.path_parameters or {}
    query = case.query if isinstance(case.query, dict) else None
    if "id" in params and case.method.upper() != "DELETE":
        kind = "ticket" if case.path.startswith("/api/tickets") else "session"
        params["id"] = KNOWN[kind][pick % len(KNOWN[kind])]
    # invalid input keeps its query ids and its body's agentId: one of them may be the one
    # invalid part, and a known id would make the request valid
    if not negative and query is not None and "agentId" in query:
        query["agentId"] = KNOWN["agent"][0]
    if not negative and query is not None and "ticketId" in query:
        query["ticketId"] = KNOWN["ticket"][pick % len(KNOWN["ticket"])]
    if (
        not negative
        and case.operation.definition.raw.get("operationId") == "createTicket"
        and isinstance(case.body, dict)
    ):
        case.body["agentId"] = KNOWN["agent"][0]


@pytest.fixture(scope="module")
def api(served: str) -> Any:
    """Seed 002's document as a schemathesis schema, aimed at the live server."""
    document = SeedContract.load().raw()
    document["servers"] = [{"url": served}]
    api = schemathesis.openapi.from_dict(document, config=CONFIG)
    api.config.update(base_url=served)
    return api


def _operations(api: Any) -> dict[str, Any]:
    """The seed's operations by operationId."""
    return {
        op.definition.raw.get("operationId"): op
        for op in (result.ok() for result in api.get_all_operations())
    }


def test_the_seed_documents_every_operation_under_contract(api: Any) -> None:
    assert sorted(set(_operations(api)) & set(OPERATIONS)) == sorted(OPERATIONS)


# one test per operation (its valid and invalid input), so that each test is a fraction
# of the whole run (the suite's watchdog stops any test at 300 s)
@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_the_api_keeps_seed_002s_contract(api: Any, operation_id: str) -> None:
    operation = _operations(api)[operation_id]
    failures: list[str] = []
    modes = [schemathesis.GenerationMode.POSITIVE]
    if operation.path_parameters or operation.query or operation.body:
        modes.append(schemathesis.GenerationMode.NEGATIVE)
    for mode in modes:
        try:
            _exercise(operation, mode)
        except BaseException as exc:  # one report per mode; the other still runs
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)


def _exercise(operation: Any, mode: schemathesis.GenerationMode) -> None:
    """EXAMPLES generated requests to one operation, each response checked."""
    # invalid input is refused with 400 (as the contract's own examples do), which the seed
    # lists only on some operations; negative_data_rejection still demands a 4xx
    negative = mode == schemathesis.GenerationMode.NEGATIVE
    excluded = [schemathesis.checks.status_code_conformance] if negative else []

    @given(case=operation.as_strategy(generation_mode=mode), pick=st.none() | st.integers(0, 10))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any, pick: int | None) -> None:
        _known_ids(case, pick, negative)
        case.call_and_validate(timeout=30, excluded_checks=excluded)

    check()
