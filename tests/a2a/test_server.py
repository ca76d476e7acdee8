"""OpenCrab as an A2A 1.0 server (issue 36, section 1), driven by the official a2a-sdk
client over real HTTP: `opencrab up`'s app served by uvicorn on 127.0.0.1 with the ticket
scheduler, its model a script (tests/fakes/scripted_provider.py).

Discovery (each agent's card, the default card), a message and its reply, a stream, a
ticket-backed task that asks a person and is answered, cancel, the task after a restart,
tokens and scopes, a hostile Host, an unknown agent, a budget's refusal."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from opencrab.auth import Scope, TokenStore
from opencrab.config import Settings, load_settings
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.conftest import PROVIDER_KEYS
from tests.core.conftest import calls
from tests.fakes.ports import free_port
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.fakes.threaded_server import serve_in_thread

WORKING = TaskState.TASK_STATE_WORKING
WAITING = TaskState.TASK_STATE_INPUT_REQUIRED
DONE = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
CANCELED = TaskState.TASK_STATE_CANCELED


@dataclass
class Served:
    """`opencrab up`'s app on a loopback port; `restart` serves a new app over the same
    database (a new process would see just what this one stored)."""

    settings: Settings
    url_of_db: str
    scripted: ScriptedProvider
    auth: bool = False
    url: str = ""
    token: str | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def start(self) -> Served:
        db = Database(self.url_of_db)
        db.upgrade()
        router = LlmRouter(self.settings)
        router.register_provider(self.scripted)
        app = create_app(self.settings, db, router=router, tickets=True, auth=self.auth)
        self._stack = contextlib.ExitStack()
        self.url = self._stack.enter_context(serve_in_thread(app, free_port()))
        return self

    def stop(self) -> None:
        self._stack.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def headers(self, token: str | None = None) -> dict[str, str]:
        secret = token or self.token
        return {} if secret is None else {"Authorization": f"Bearer {secret}"}

    @contextlib.asynccontextmanager
    async def client(
        self,
        agent: str = "aki",
        *,
        streaming: bool = False,
        token: str | None = None,
        binding: str = "JSONRPC",
    ) -> AsyncIterator[Client]:
        """The official SDK's client of `agent`, from its card, over `binding`."""
        async with httpx.AsyncClient(headers=self.headers(token), timeout=60) as http:
            card = await A2ACardResolver(http, f"{self.url}/a2a/{agent}").get_agent_card()
            config = ClientConfig(
                streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
            )
            yield await create_client(card, client_config=config)


FAST = {
    "OPENCRAB_TICKETS__POLL_SECS": "0.05",  # the ticket scheduler looks every 50 ms
    "OPENCRAB_A2A__POLL_SECS": "0.05",  # and so do the A2A followers
    "OPENCRAB_AGENT__MEMORY_EMBEDDING": "false",
}


def fast_settings(home: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings of their own data directory (as tests/conftest.py's data_dir), fast."""
    for name in list(os.environ):
        if name.startswith(("OPENCRAB_", "OTEL_")) or name in PROVIDER_KEYS:
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENCRAB_HOME", str(home))
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def served_over(settings: Settings, url: str, scripted: ScriptedProvider, **kw: Any) -> Served:
    served = Served(settings, url, scripted, **kw).start()
    with httpx.Client(headers=served.headers()) as http:
        made = http.post(f"{served.url}/api/agents", json={"name": "aki", "prompt": "Help."})
        assert made.status_code == 201, made.text
    return served


@pytest.fixture(scope="module")
def shared_script() -> ScriptedProvider:
    return ScriptedProvider("openai")


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, shared_script: ScriptedProvider
) -> Iterator[Served]:
    """One served app for the tests that leave each other alone (each its own context)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        settings = fast_settings(tmp_path_factory.mktemp("a2a") / "data", monkeypatch)
        served = served_over(settings, settings.database_url, shared_script)
    yield served
    served.stop()


@pytest.fixture
def scripted(shared_script: ScriptedProvider) -> ScriptedProvider:
    """The model's script, empty: each test queues its replies, the last one repeating."""
    shared_script.outcomes.clear()
    shared_script.requests.clear()
    return shared_script


@pytest.fixture
def served(shared: Served, scripted: ScriptedProvider) -> Served:
    return shared


@pytest.fixture
def fast(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return fast_settings(data_dir, monkeypatch)


@pytest.fixture
def own(fast: Settings, scripted: ScriptedProvider) -> Iterator[Served]:
    """An app of the test's own (restarted by it)."""
    served = served_over(fast, fast.database_url, scripted)
    yield served
    served.stop()


def say(text: str, *, ticket: bool = False, **ids: str) -> SendMessageRequest:
    message = Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)])
    for name, value in ids.items():
        setattr(message, name, value)
    if ticket:
        meta = Struct()
        meta.update({"opencrab": {"ticket": True}})
        message.metadata.CopyFrom(meta)
    return SendMessageRequest(message=message)


async def send(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


def text_of(message: Message) -> str:
    return "".join(part.text for part in message.parts)


def ask_and_finish(scripted: ScriptedProvider, question: str = "Which branch?") -> None:
    """A ticket's script: a step, a question; after the answer, done with a summary."""
    scripted.then(
        calls(("add_step", {"title": "Read the diff"}), ("ask_human", {"question": question})),
        calls(
            ("update_step", {"index": 0, "status": "completed"}),
            ("complete_ticket", {"summary": "Reviewed main."}),
        ),
        "(the script ran out)",
    )


# ------------------------------------------------------------------ discovery
async def test_every_agent_has_its_card_and_the_default_card_links_them(served: Served) -> None:
    with httpx.Client() as http:
        made = http.post(
            f"{served.url}/api/agents",
            json={"name": "bo", "description": "Bo.", "prompt": "Review."},
        )
        assert made.status_code == 201, made.text
        bo_id = made.json()["id"]
    async with httpx.AsyncClient() as http:
        card: AgentCard = await A2ACardResolver(http, f"{served.url}/a2a/aki").get_agent_card()
        by_id = await A2ACardResolver(http, f"{served.url}/a2a/{bo_id}").get_agent_card()
        default = await A2ACardResolver(http, served.url).get_agent_card()
    assert card.name == "aki"
    assert "Help." in card.description  # no description of its own: its persona and prompt
    assert {(i.protocol_binding, i.url) for i in card.supported_interfaces} == {
        ("JSONRPC", f"{served.url}/a2a/aki"),
        ("HTTP+JSON", f"{served.url}/a2a/aki"),
    }
    assert card.capabilities.streaming
    scheme = card.security_schemes["bearerAuth"].http_auth_security_scheme
    assert scheme.scheme == "bearer"
    assert "self-learning" in {s.id for s in card.skills}  # its OpenCrab skills
    assert (by_id.name, by_id.description) == ("bo", "Bo.")
    assert default.name == "aki"  # no default_agent: the first published by name
    (listing,) = default.capabilities.extensions
    agents = MessageToDict(listing.params)["agents"]
    assert [a["name"] for a in agents] == ["aki", "bo"]
    assert agents[1]["cardUrl"] == f"{served.url}/a2a/bo/.well-known/agent-card.json"


async def test_an_unknown_agent_is_404_and_a_clear_json_rpc_error(served: Served) -> None:
    with httpx.Client() as http:
        card = http.get(f"{served.url}/a2a/nobody/.well-known/agent-card.json")
        rpc = http.post(
            f"{served.url}/a2a/nobody",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}},
        )
    assert card.status_code == 404
    assert "no published agent 'nobody'" in card.json()["error"]["message"]
    assert rpc.status_code == 404
    assert rpc.json()["error"]["code"] == -32602
    assert "no published agent 'nobody'" in rpc.json()["error"]["message"]


# ------------------------------------------------------------------ turns
async def test_a_message_gets_the_agents_reply_in_its_context(
    served: Served, scripted: ScriptedProvider
) -> None:
    scripted.then(reply("Hello, I am aki."), reply("You said hi before."))
    async with served.client() as client:
        (first,) = await send(client, say("hi"))
        assert first.HasField("message")
        assert text_of(first.message) == "Hello, I am aki."
        assert first.message.role == Role.ROLE_AGENT
        context = first.message.context_id
        (second,) = await send(client, say("again?", context_id=context))
    assert second.message.context_id == context
    assert text_of(second.message) == "You said hi before."
    said = [str(m.content) for m in scripted.requests[1].messages if m.role == "user"]
    assert said[-2:] == ["hi", "again?"]  # the same session: the first turn is history
    with httpx.Client() as http:  # the context is an OpenCrab session, as REST sees it
        session = http.get(f"{served.url}/api/sessions/{context}").json()
    assert [m["content"] for m in session["messages"]][-1] == "You said hi before."


async def test_the_http_json_binding_answers_too(
    served: Served, scripted: ScriptedProvider
) -> None:
    scripted.then(reply("Over HTTP+JSON."))
    async with served.client(binding="HTTP+JSON") as client:
        (answer,) = await send(client, say("hi", context_id="rest-ctx"))
        with pytest.raises(TaskNotFoundError, match="agent aki has no task"):
            await client.get_task(GetTaskRequest(id="no-such-task"))
    assert (text_of(answer.message), answer.message.context_id) == ("Over HTTP+JSON.", "rest-ctx")


async def test_a_stream_gives_status_updates_then_the_reply_in_order(
    served: Served, scripted: ScriptedProvider
) -> None:
    scripted.then(
        calls(("ws_write", {"path": "notes.md", "content": "crab"})), reply("Wrote the notes.")
    )
    async with served.client(streaming=True) as client:
        events = await send(client, say("write notes", context_id="my-own-context"))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds == ["task", "status_update", "status_update"]
    task = events[0].task
    assert task.status.state == WORKING
    assert task.context_id == "my-own-context"  # any contextId: a session of its own
    ran, done = events[1].status_update, events[2].status_update
    assert (ran.status.state, text_of(ran.status.message)) == (WORKING, "ran ws_write: done")
    assert done.status.state == DONE
    assert text_of(done.status.message) == "Wrote the notes."
    assert {ran.task_id, done.task_id} == {task.id}


async def test_a_budget_refusal_is_a_failed_task_naming_it(
    served: Served, scripted: ScriptedProvider
) -> None:
    with httpx.Client() as http:
        made = http.post(
            f"{served.url}/api/agents",
            json={"name": "bu", "prompt": "Spend.", "llm": {"dailyBudgetUsd": 0}},
        )
        assert made.status_code == 201, made.text
    scripted.then(reply("Never said."))
    async with served.client("bu") as client:
        (refused,) = await send(client, say("one"))
    assert refused.task.status.state == FAILED
    assert "budget_exceeded" in text_of(refused.task.status.message)
    assert "budget" in text_of(refused.task.status.message)
    assert scripted.requests == []  # refused before any call


# ------------------------------------------------------------------ ticket tasks
async def test_a_ticket_task_streams_its_steps_asks_and_is_answered(
    served: Served, scripted: ScriptedProvider
) -> None:
    ask_and_finish(scripted)
    scripted.hold = threading.Event()  # the ticket's model call waits for the stream
    events: list[StreamResponse] = []
    async with served.client(streaming=True) as client:
        async for event in client.send_message(say("Review PR 7", ticket=True)):
            events.append(event)
            scripted.hold.set()  # the stream has the task: the ticket goes on
    assert events[0].WhichOneof("payload") == "task"
    task = events[0].task
    updates = [e.status_update for e in events[1:]]
    assert updates, "the ticket's progress arrives as status updates"
    assert all(u.task_id == task.id for u in updates)
    seen = [(u.status.state, text_of(u.status.message)) for u in updates]
    assert all(a != b for a, b in itertools.pairwise(seen)), seen  # only changes are sent
    assert updates[-1].status.state == WAITING
    assert text_of(updates[-1].status.message) == "Which branch?"
    async with served.client(streaming=True, binding="HTTP+JSON") as client:
        (again,) = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task.id))]
    assert (again.task.id, again.task.status.state) == (task.id, WAITING)  # it waits: done
    async with served.client() as client:
        got = await client.get_task(GetTaskRequest(id=task.id))
        steps = MessageToDict(got.metadata)["opencrab"]["steps"]
        assert [(s["title"], s["status"]) for s in steps] == [("Read the diff", "pending")]
        (answered,) = await send(client, say("main", task_id=task.id, context_id=task.context_id))
    done = answered.task
    assert done.status.state == DONE
    assert text_of(done.status.message).startswith("Reviewed main.")
    assert done.artifacts[0].name == "result"
    assert done.artifacts[0].parts[0].text.startswith("Reviewed main.")
    assert "main" in [text_of(m) for m in done.history if m.role == Role.ROLE_USER]
    assert "main" in [str(m.content) for m in scripted.requests[1].messages]


async def test_tasks_cancel_cancels_the_ticket(served: Served, scripted: ScriptedProvider) -> None:
    ask_and_finish(scripted)
    async with served.client() as client:
        (asked,) = await send(client, say("Review PR 8", ticket=True, context_id="pr-8"))
        assert asked.task.status.state == WAITING
        canceled = await client.cancel_task(CancelTaskRequest(id=asked.task.id))
        assert canceled.status.state == CANCELED
        assert "canceled over A2A" in text_of(canceled.status.message)
        assert (await client.get_task(GetTaskRequest(id=asked.task.id))).status.state == CANCELED
        with pytest.raises(TaskNotCancelableError, match="is already canceled"):
            await client.cancel_task(CancelTaskRequest(id=asked.task.id))
        listed = await client.list_tasks(ListTasksRequest(context_id="pr-8"))
        as_canceled = await client.list_tasks(ListTasksRequest(status=CANCELED))
        as_failed = await client.list_tasks(ListTasksRequest(status=FAILED, context_id="pr-8"))
    assert [(t.id, t.status.state) for t in listed.tasks] == [(asked.task.id, CANCELED)]
    assert [t.id for t in as_canceled.tasks] == [asked.task.id]
    assert list(as_failed.tasks) == []
    with httpx.Client() as http:  # the ticket itself failed, with the reason
        ticket = http.get(f"{served.url}/api/tickets/{asked.task.id}").json()
    assert ticket["status"] == "failed"
    assert ticket["errorMessage"].startswith("canceled over A2A")


async def test_a_task_survives_a_restart(own: Served, scripted: ScriptedProvider) -> None:
    ask_and_finish(scripted, "Which tag?")
    async with own.client() as client:
        (asked,) = await send(client, say("Release notes", ticket=True, context_id="rel"))
    own.restart()
    async with own.client() as client:
        again = await client.get_task(GetTaskRequest(id=asked.task.id))
        assert (again.status.state, again.context_id) == (WAITING, "rel")
        assert text_of(again.status.message) == "Which tag?"
        (answered,) = await send(client, say("v2", task_id=asked.task.id))
    assert answered.task.status.state == DONE


async def test_an_unknown_task_and_a_finished_ones_answer_are_clear_errors(
    served: Served, scripted: ScriptedProvider
) -> None:
    scripted.then(calls(("complete_ticket", {"summary": "Done at once."})), "(ran out)")
    async with served.client() as client:
        with pytest.raises(TaskNotFoundError, match="agent aki has no task"):
            await client.get_task(GetTaskRequest(id="4f5b0c3e-0000-4000-8000-000000000000"))
        (done,) = await send(client, say("Quick one", ticket=True))
        assert done.task.status.state == DONE
        with pytest.raises(InvalidParamsError, match="is over"):
            await send(client, say("more", task_id=done.task.id))


# ------------------------------------------------------------------ security
@pytest.fixture
def guarded(fast: Settings, scripted: ScriptedProvider) -> Iterator[Served]:
    """The app requiring tokens, with an admin token for the test's own REST calls."""
    db = Database(fast.database_url)
    db.upgrade()
    _, admin = TokenStore(db).create("admin")
    db.close()
    served = served_over(fast, fast.database_url, scripted, auth=True, token=admin)
    yield served
    served.stop()


async def test_a_missing_or_bad_token_is_refused_and_scopes_hold(
    guarded: Served, scripted: ScriptedProvider
) -> None:
    scripted.then(reply("Hi."))
    async with httpx.AsyncClient() as http:  # the card is open: it names the scheme
        card = await A2ACardResolver(http, f"{guarded.url}/a2a/aki").get_agent_card()
        for headers in ({}, {"Authorization": "Bearer ocb_not-a-token"}):
            http.headers.update(headers)
            client = await create_client(card, ClientConfig(streaming=False, httpx_client=http))
            with pytest.raises(A2AClientError, match="401"):
                await send(client, say("hi"))
    db = Database(guarded.url_of_db)
    _, reader = TokenStore(db).create("reader", Scope.read)
    _, chatter = TokenStore(db).create("chatter", Scope.chat)
    db.close()
    async with guarded.client(token=reader) as client:
        with pytest.raises(InvalidRequestError, match="sending a message needs 'chat'"):
            await send(client, say("hi"))
    async with guarded.client(token=chatter) as client:
        (answer,) = await send(client, say("hi"))
    assert text_of(answer.message) == "Hi."
    assert len(scripted.requests) == 1  # the refused ones never reached the model


async def test_a_hostile_host_is_refused(served: Served) -> None:
    with httpx.Client() as http:
        for path in ("/a2a/aki", "/a2a/aki/.well-known/agent-card.json"):
            refused = http.request(
                "POST" if path == "/a2a/aki" else "GET",
                f"{served.url}{path}",
                headers={"Host": "evil.example"},
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            )
            assert refused.status_code == 421, path
            assert "does not answer to the host" in refused.text


async def test_a_page_of_another_site_is_refused(
    served: Served, scripted: ScriptedProvider
) -> None:
    """The REST API's cross-site guard holds for A2A: a browser page of another site may
    not send a message, either binding, nor with an older browser's Origin alone."""
    scripted.then(reply("Never said."))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    page = {"Origin": "https://evil.example"}
    with httpx.Client() as http:
        for path, headers in (
            ("/a2a/aki", {**page, "Sec-Fetch-Site": "cross-site"}),
            ("/a2a/aki/message:send", {**page, "Sec-Fetch-Site": "cross-site"}),
            ("/a2a/aki", page),
        ):
            refused = http.post(f"{served.url}{path}", headers=headers, json=body)
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"] == "cross_site_request"
    assert scripted.requests == []


async def test_an_oversized_message_is_refused_by_the_message_rules(served: Served) -> None:
    async with served.client() as client:
        with pytest.raises(InvalidParamsError, match="200,000 characters; the limit is 100,000"):
            await send(client, say("x" * 200_000))
        picture = say("look")
        picture.message.parts.append(Part(url="https://example.org/crab.png"))
        with pytest.raises(ContentTypeNotSupportedError, match="part 1 is url"):
            await send(client, picture)
    limit = served.settings.gateway.rest.max_body_kb * 1024
    body = b'{"jsonrpc": "2.0", "id": 1, "params": {"x": "' + b"x" * limit + b'"}}'
    with httpx.Client() as http:  # a body over the REST API's limit is cut off unread
        rpc = http.post(f"{served.url}/a2a/aki", content=body)
        rest = http.post(
            f"{served.url}/a2a/aki/message:send", content=body, headers={"A2A-Version": "1.0"}
        )
    for refused in (rpc, rest):
        assert refused.status_code == 413, refused.text
        assert "[gateway.rest] max_body_kb" in refused.text
    assert rpc.json()["error"]["code"] == -32600  # JSON-RPC's invalid request


async def test_on_postgresql_too(fast: Settings, pg_url: str, scripted: ScriptedProvider) -> None:
    """The rest runs on SQLite; a reply and a ticket task answered, on PostgreSQL."""
    served = served_over(fast, pg_url, scripted)
    try:
        scripted.then(reply("Hello."))
        async with served.client() as client:
            (answer,) = await send(client, say("hi"))
            assert text_of(answer.message) == "Hello."
            ask_and_finish(scripted)
            (asked,) = await send(client, say("Review", ticket=True))
            assert asked.task.status.state == WAITING
            (done,) = await send(client, say("main", task_id=asked.task.id))
            assert done.task.status.state == DONE
    finally:
        served.stop()
