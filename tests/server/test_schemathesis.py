"""schemathesis against the served spec: every operation of /openapi.json, over a real socket.

The server runs in-process (uvicorn in a thread) with the OpenAI-compatible endpoint on
and a scripted model; one agent and one chat session exist so that generated requests
reach past the 404 of a random id. Every response must be a non-5xx that matches its
documented status, content type and schema, and invalid input must be refused with 4xx.
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
from hypothesis.errors import Unsatisfiable

from opencrab.config import Settings, load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.sessions import ensure_chat_session
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider

KNOWN: dict[str, str] = {}
# 400 is how the API refuses input that is well-formed but wrong (seed 002): a path that
# leaves the workspace, a standard skill's name, a session that has ended.
CONFIG = schemathesis.Config.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "400", "401", "404", "409", "413", "429"]
            },
            # schemathesis' own list, and 413: a body over [gateway.rest] max_body_kb is
            # refused before it is read (documented on every operation with a body)
            "negative_data_rejection": {
                "expected-statuses": [
                    *("400", "401", "403", "404", "405", "406", "409", "413"),
                    *("415", "422", "428", "429", "5xx"),
                ]
            },
        }
    }
)
EXAMPLES = 25  # per operation


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("schemathesis")
    config: Settings = load_settings(
        overrides={
            "data_dir": str(data),
            "gateway": {"openai_compat": {"enabled": True}},
        }
    )
    db = Database(config.database_url)
    db.upgrade()
    agent = AgentStore(db, config).create(AgentCreate(name="probe", prompt="Be brief."))
    KNOWN["agent"] = agent.id
    KNOWN["session"] = ensure_chat_session(db, agent.id)
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
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def _known_ids(case: Any, flip: bool) -> None:
    """Point path ids at the agent and session that exist (when `flip`; never for DELETE)."""
    params = case.path_parameters or {}
    if not flip or case.method.upper() == "DELETE" or "id" not in params:
        return
    if case.path.startswith("/api/agents/{id}"):
        params["id"] = KNOWN["agent"]
    elif case.path.startswith("/api/sessions/{id}"):
        params["id"] = KNOWN["session"]


CLOSED = f"http://127.0.0.1:{free_port()}/mcp"
"""Where a generated MCP server's URL points: loopback, refused by the SSRF guard."""


def _no_outside_server(case: Any) -> None:
    """A generated MCP server reaches nothing: its URL is CLOSED without allowPrivate (the
    guard refuses it before a packet is sent), its command /bin/false."""
    body = case.body
    if not case.path.startswith("/api/mcp/servers") or not isinstance(body, dict):
        return
    if body.get("url"):
        body["url"], body["allowPrivate"] = CLOSED, False
    if body.get("command"):
        body["command"] = "/bin/false"


# One test per OpenAPI tag and generation mode, so that each test is a fraction of the
# whole run (the suite's watchdog stops any test at 300 s); every operation and mode is in
# exactly one of these groups (test_every_case_is_in_exactly_one_group), so together they
# cover the document as one run did.
TAGS = (  # in the order the document lists them
    "Gateways",
    "MCP",
    "LLM settings",
    "LLM analytics",
    "Agent mode",
    "Budgets",
    "Imports",
    "Analytics",
    "LLM",
    "Workspace",
    "Memory",
    "Skills",
    "Traces",
    "Agents",
    "Tools",
    "OpenAI-compatible",
    "Inbox",
    "Approvals",
    "Schedules",
    "Tickets",
    "Discussions",
    "Sessions",
    "Health",
)


@pytest.fixture(scope="module")
def api(served: str) -> Any:
    """The served /openapi.json as a schemathesis schema (loaded once per module)."""
    return schemathesis.openapi.from_url(f"{served}/openapi.json", config=CONFIG)


POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE
GROUPS = [(tag, POSITIVE) for tag in TAGS] + [
    (tag, NEGATIVE)
    for tag in TAGS
    if tag != "Health"  # its one operation takes no input
]


def _cases(api: Any) -> list[tuple[Any, schemathesis.GenerationMode]]:
    """Every operation with valid input, and with invalid input where there is any to send."""
    operations = [op.ok() for op in api.get_all_operations()]
    cases = [(operation, POSITIVE) for operation in operations]
    cases += [
        (operation, NEGATIVE)
        for operation in operations
        if operation.path_parameters or operation.query or operation.body
    ]
    return cases


def test_every_case_is_in_exactly_one_group(api: Any) -> None:
    cases = _cases(api)
    assert len({operation.label for operation, _ in cases}) >= 40
    misplaced = {
        f"{operation.label} ({mode.value})": groups
        for operation, mode in cases
        if len(groups := [(tag, m) for tag, m in GROUPS if _in(operation, mode, tag, m)]) != 1
    }
    assert not misplaced, f"each operation needs exactly one tag of TAGS: {misplaced}"
    empty = [group for group in GROUPS if not any(_in(*case, *group) for case in cases)]
    assert not empty, f"groups without cases: {empty}"


def _in(operation: Any, mode: Any, tag: str, group_mode: Any) -> bool:
    return mode == group_mode and tag in (operation.tags or [])


@pytest.mark.parametrize(("tag", "mode"), GROUPS, ids=[f"{t}-{m.value}" for t, m in GROUPS])
def test_the_api_matches_its_spec(api: Any, tag: str, mode: schemathesis.GenerationMode) -> None:
    cases = [case for case in _cases(api) if _in(*case, tag, mode)]
    assert cases, f"no case in the group {tag} ({mode.value})"
    failures: list[str] = []
    exercised = 0
    for operation, _ in cases:

        @given(case=operation.as_strategy(generation_mode=mode), flip=st.booleans())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any, flip: bool) -> None:
            _known_ids(case, flip)
            _no_outside_server(case)
            case.call_and_validate(timeout=30)

        try:
            check()
            exercised += 1
        except Unsatisfiable:
            # nothing in its input can be invalid (e.g. a path `{id}` that is any string, an
            # agent addressed by id or name): no negative case exists to send
            if mode != NEGATIVE:
                failures.append(f"{operation.label} ({mode.value}): no valid case generated")
        except BaseException as exc:  # one report per operation; the others still run
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
    assert exercised, f"no operation of {tag} ({mode.value}) could be exercised"
