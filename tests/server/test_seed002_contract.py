"""schemathesis runs seed 002's own OpenAPI document (tests/fixtures/seed002/openapi.yaml)
over EVERY operation it declares (agents, tools, tickets, sessions) against a live server
holding the mixed data a real instance has: agents with and without a description, the
tools, a ticket in each state with its sessions, steps and messages, chat sessions (one
talked in) and a discussion. A client generated from the seed's document must never meet
a status or a shape the document does not declare: every response, to valid and to
invalid input, is a non-5xx with a documented status, content type and body.

Two exceptions, both the seed's own BadRequest (400 with ErrorResponse), which the seed
documents as how input is refused but lists on some operations only:
- invalid input: a body or query parameter the document itself says is invalid (a
  client generated from it cannot send one) may be refused with that 400 wherever it is
  sent. A malformed path id is no such case: the seed answers an id it does not know
  with 404, so must we;
- updateAgent, the one operation with a body that does not list it: a name the server
  refuses (taken by another agent, with control characters, UUID-shaped: names address
  agents) is refused there as createAgent refuses it, with the seed's 400.

Generated requests are pointed at stored ids half of the time, so they reach past the 404
of a random id (never for DELETE, which would remove the data the other operations need).
addMessage is pointed at the chats and the discussion as well as at tickets' sessions: a
message to each kind is answered as the seed declares (201, or 400 for a discussion).
getSession is pointed at tickets' sessions only: no seed operation hands out the id of a
chat or a discussion (listSessions lists tickets' sessions unless `kind` asks), and one
read by its id has `ticketId: null`, which SessionResponse does not allow.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.core.parameters import ParameterLocation

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.discussion import Discussion
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.repositories import tools as tools_repo
from opencrab.tickets import service
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.seed_openapi import SeedContract

OPERATIONS = (
    "listAgents",
    "getAgent",
    "createAgent",
    "updateAgent",
    "deleteAgent",
    "listTools",
    "getTool",
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
EXAMPLES = 20  # per operation and mode


def _stock_tickets(db: Database, agent_id: str) -> None:
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
    KNOWN.update(ticket=tickets, session=sessions)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("seed002")
    config = load_settings(overrides={"data_dir": str(data)})
    db = Database(config.database_url)
    db.upgrade()
    agents = AgentStore(db, config)
    probe = agents.create(AgentCreate(name="probe", prompt="Be brief.", description="Answers."))
    plain = agents.create(AgentCreate(name="plain", prompt="Be brief."))  # no description
    KNOWN["agent"] = [probe.id, plain.id]
    _stock_tickets(db, probe.id)
    ensure_chat_session(db, plain.id)  # a chat nobody has talked in yet
    Discussion.create(db, theme="Four-day weeks", participants=[probe.id, plain.id])
    router = LlmRouter(config)
    router.register_provider(ScriptedProvider("openai", "A scripted answer."))
    app = create_app(config, db, router=router)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        threading.Event().wait(0.05)
    base = f"http://127.0.0.1:{port}"
    # a chat talked in through the REST gateway, as a person would
    with httpx.Client(base_url=base, timeout=60) as client:
        chat = client.post("/api/sessions", json={"agentId": "probe"}).json()["id"]
        said = client.post(f"/api/sessions/{chat}/messages", json={"content": "Hello there"})
        assert said.status_code == 201, said.text
        listed = client.get("/api/sessions", params={"kind": "all"})
        assert listed.status_code == 200, listed.text
        others = [s["id"] for s in listed.json() if s["kind"] != "ticket"]
    assert len(others) == 3, others  # the two chats and the discussion
    KNOWN["other_session"] = others
    with db.read() as conn:
        KNOWN["tool"] = [row.id for row in tools_repo.all_tools(conn)]
    assert KNOWN["tool"], "the runtime lists its actions as tools"
    try:
        yield base
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
        kind = case.path.split("/")[2].removesuffix("s")  # /api/tickets/{id} → ticket
        known = KNOWN[kind]
        if case.operation.definition.raw.get("operationId") == "addMessage":
            known = known + KNOWN["other_session"]  # chats and the discussion too
        params["id"] = known[pick % len(known)]
    # invalid input keeps its query ids and its body's ids: one of them may be the one
    # invalid part, and a known id would make the request valid
    if negative:
        return
    if query is not None and "agentId" in query:
        query["agentId"] = KNOWN["agent"][pick % len(KNOWN["agent"])]
    if query is not None and "ticketId" in query:
        query["ticketId"] = KNOWN["ticket"][pick % len(KNOWN["ticket"])]
    body = case.body if isinstance(case.body, dict) else None
    operation_id = case.operation.definition.raw.get("operationId")
    if body is not None and operation_id == "createTicket":
        body["agentId"] = KNOWN["agent"][pick % len(KNOWN["agent"])]
    if body is not None and isinstance(body.get("toolIds"), list):
        body["toolIds"] = KNOWN["tool"][: pick % 3]


@pytest.fixture(scope="module")
def api(served: str) -> Any:
    """Seed 002's document as a schemathesis schema, aimed at the live server."""
    document = SeedContract.load().raw()
    document["servers"] = [{"url": served}]
    api = schemathesis.openapi.from_dict(document)
    api.config.update(base_url=served)
    return api


def _operations(api: Any) -> dict[str, Any]:
    """The seed's operations by operationId."""
    return {
        op.definition.raw.get("operationId"): op
        for op in (result.ok() for result in api.get_all_operations())
    }


def test_every_operation_of_the_seed_is_under_contract(api: Any) -> None:
    assert sorted(_operations(api)) == sorted(OPERATIONS)


BAD_REQUEST_UNLISTED = {"updateAgent"}
"""The seed's operations with a body whose responses leave out its BadRequest."""


def _refused_with_bad_request(response: Any) -> bool:
    """A 400 in the seed's ErrorResponse shape."""
    if response.status_code != 400:
        return False
    body = response.json()
    assert isinstance(body.get("error"), str), body
    assert isinstance(body.get("message"), str), body
    return True


def status_documented(ctx: Any, response: Any, case: Any) -> bool | None:
    """status_code_conformance, with the seed's BadRequest on updateAgent (module docstring)."""
    operation_id = case.operation.definition.raw.get("operationId")
    if operation_id in BAD_REQUEST_UNLISTED and _refused_with_bad_request(response):
        return None
    return checks.status_code_conformance(ctx, response, case)


def invalid_input_refused_or_documented(ctx: Any, response: Any, case: Any) -> bool | None:
    """status_documented, except that a body or query the document calls invalid may get
    the seed's BadRequest where it is not listed; a malformed path id may not."""
    meta = case.meta
    invalid_input = meta is not None and (
        meta.is_negative_at(ParameterLocation.BODY) or meta.is_negative_at(ParameterLocation.QUERY)
    )
    if (
        invalid_input
        and not meta.is_negative_at(ParameterLocation.PATH)
        and _refused_with_bad_request(response)
    ):
        return None
    return status_documented(ctx, response, case)


POSITIVE_CHECKS = [
    checks.not_a_server_error,
    status_documented,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
NEGATIVE_CHECKS = [
    checks.not_a_server_error,
    invalid_input_refused_or_documented,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


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
    negative = mode == schemathesis.GenerationMode.NEGATIVE
    chosen = NEGATIVE_CHECKS if negative else POSITIVE_CHECKS

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
        case.call_and_validate(timeout=60, checks=chosen)

    check()


def test_a_message_to_each_chat_and_the_discussion_keeps_the_contract(api: Any) -> None:
    """addMessage with a valid message to every session that is not a ticket's (the chat
    talked in, the empty chat, the discussion): the generated cases above reach them only
    now and then, so each one is sent here too, under the same checks."""
    operation = _operations(api)["addMessage"]
    answered = []
    for session_id in KNOWN["other_session"]:
        case = operation.Case(path_parameters={"id": session_id}, body={"content": "And now?"})
        response = case.call_and_validate(timeout=60, checks=POSITIVE_CHECKS)
        answered.append(response.status_code)
    assert sorted(answered) == [201, 201, 400], answered  # a discussion takes no chat message
