"""The WebSocket gateway, `/api/ws`: chat with an agent and watch sessions live.

Messages are JSON objects with a `type`. From the client:

- `{"type": "ping"}` → `{"type": "pong"}`
- `{"type": "subscribe", "sessionId": S, "afterSeq": N?}` → `{"type": "subscribed",
  "sessionId": S, "seq": M}`, then `{"type": "event", "sessionId": S, "seq": Q,
  "event": E}` for every AgentEvent of the session (seed 000 form) as it is written, `Q`
  being its place in the log; with `afterSeq` the stored events after N (up to M) are
  sent first, so a client that reconnects with the last `seq` it got misses none.
- `{"type": "unsubscribe", "sessionId": S}` → `{"type": "unsubscribed", "sessionId": S}`
- `{"type": "chat", "agent": ID_OR_NAME, "content": TEXT, "sessionId": S?,
  "requestId": R?}` runs a turn (a new chat session when `sessionId` is left out) and
  sends each of its steps in the one step serialiser's form (core/steps.step_json), in
  the engine's order: `chat.started` (sessionId, traceId, userMessage), `compacted`,
  `token` (text, as the model streams it), `llm.replied` (model, tokens, cost),
  `action` (name, arguments, success, output), `reply` (text, via, message),
  `turn.failed` (error, message), then `chat.done` (reply, stoppedBy, iterations,
  error) — each carrying `requestId`. A turn that ended on a call held for a person's
  approval (`chat.done` with `stoppedBy` "approval" and `approvalId`) is preceded by
  `{"type": "approval.waiting", "approvalId", "sessionId", "toolName", "arguments",
  "notice", "requestId"}` (the notice says where to decide it); once it is decided
  (`/api/approvals/{id}/approve` or `/deny`, the dashboard's buttons, through any
  server) the turn that continues the chat — run by whichever process claimed it —
  sends its closing steps here while this connection is open (`reply` or `turn.failed`,
  then its own `chat.done`, or `approval.waiting` before it when it held a call again),
  each with `"followUp": true` and the first request's `requestId`
  (core/approval_followups.py). A connection runs
  at most `[gateway.rest] ws_max_turns_per_connection` turns at once; a chat beyond that
  is refused with a `too_many_turns` error (send it again after a `chat.done`).

Discussions (seed 001; the same as `/api/discussions`):
- `{"type": "discussion.start", "theme": T, "participants": [ID_OR_NAME, …], "mode"?,
  "facilitator"?, "maxTurns"?, "requestId"?}` starts one on the server →
  `{"type": "discussion.started", "sessionId": S, "discussion": {…}}`, and this
  connection follows it at once (`subscribed` …).
- Following a discussion (`subscribe` with its id): `subscribed` also lists the
  `participants` (agentId, name, traceId); each `event` carries the `agentId` whose
  trace it belongs to (a person's post has none); a discussion the server runs also
  sends `discussion.turn` (agentId, agent, turn, spoke, action, error) after every turn
  and `discussion.ended` (endedBy) at the end.
- `{"type": "discussion.post", "sessionId": S, "content": TEXT, "senderName"?,
  "requestId"?}` speaks into a running discussion (a mentor's instruction) →
  `{"type": "discussion.posted", "sessionId": S, "message": {…}}`.
- `{"type": "discussion.join", "sessionId": S, "agent": ID_OR_NAME, "requestId"?}` adds
  an agent → `{"type": "discussion.joined", "sessionId": S, "agentId": A}`.

Agent mode (seed 004; the same as `/api/agent-mode/…`): `subscribe` with an agent-mode
session's id → `{"type": "subscribed", "sessionId": S, "kind": "agentMode", "status":
SESSION_STATUS}`, then one notice per change the runner makes (a task started, waiting
for input, answered, completed, failed, the session paused, …): `{"type": "agentMode",
"kind": "agentMode", "sessionId": S, "taskId": T|null, "sessionStatus": …,
"taskStatus": …|null, "subAgentStatus": …|null}` (the seed's enum values; a question
waits while `subAgentStatus` is `WaitingInput`). Notices are not replayed (`afterSeq` is
ignored): read `GET /api/agent-mode/sessions/{id}/run` after `subscribed` and on each
notice for the rest (questions, diffs, deliveries). `unsubscribe` stops them; the
subscription limit counts these sessions too. An id that is neither a session nor an
agent-mode session is a `not_found` error.

The inbox (the same as `GET /api/inbox`): `{"type": "inbox.subscribe"}` → `{"type":
"inbox", "count": N}` at once and again whenever the number of items waiting for a
person changes (server/inbox_live.py); `{"type": "inbox.unsubscribe"}` stops it.

Problems are answered with `{"type": "error", "error": CODE, "message": TEXT,
"requestId": R?}` and the connection stays open. Any token may open the socket and
follow sessions (`read`); `chat` and the `discussion.*` messages need a token whose
scope covers `chat` (else a `forbidden` error; opencrab.server.scopes). A turn started
here finishes and is stored even if the client goes away. A client that cannot keep up
is closed with 4429 (see server/live.py), and one opened with a bearer token is closed
with 4401 once that token is revoked, or the dashboard sign-in it was opened with ends
(server/auth.py). A client that cannot send headers offers the token as the subprotocol
`opencrab.bearer.<token>` beside `opencrab`; the socket is accepted with `opencrab`,
never with the token. A browser page from another origin is refused
(4403) unless its origin is in `[gateway.rest] cors_origins`, and a Host that is not one
of the server's names (DNS rebinding) is refused with 4421, before the socket is
accepted (opencrab.server.guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from opencrab.agentmode.runner import AgentModeRunner
from opencrab.auth import ApiToken, Scope
from opencrab.core.approval_followups import FollowUpOutcome, Watcher, waiting_notice
from opencrab.core.discussion import (
    DEFAULT_MAX_TURNS,
    MAX_PARTICIPANTS,
    Discussion,
    DiscussionRunner,
)
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult, step_json
from opencrab.errors import ForbiddenError, NotFoundError, OpenCrabError
from opencrab.messages import MessageText, WebSocketSource
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports.sessions import message_response
from opencrab.server.api.discussions import DiscussionResponse, describe, start_discussion
from opencrab.server.auth import UNAUTHORIZED, TokenWatch, ws_subprotocol
from opencrab.server.inbox_live import InboxCounter
from opencrab.server.live import Client, EventHub, event_message
from opencrab.server.schemas import MAX_SQL_INTEGER
from opencrab.server.scopes import refusal
from opencrab.server.session_feed import session_feed

log = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 100


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Ping(_In):
    type: Literal["ping"]


class Subscribe(_In):
    type: Literal["subscribe"]
    session_id: UUID = Field(alias="sessionId")
    after_seq: int | None = Field(default=None, alias="afterSeq", ge=0, le=MAX_SQL_INTEGER)


class Unsubscribe(_In):
    type: Literal["unsubscribe"]
    session_id: UUID = Field(alias="sessionId")


class Chat(_In):
    type: Literal["chat"]
    agent: str = Field(min_length=1, max_length=200)
    content: MessageText
    session_id: UUID | None = Field(default=None, alias="sessionId")
    request_id: str | None = Field(default=None, alias="requestId", max_length=200)


class DiscussionStart(_In):
    type: Literal["discussion.start"]
    theme: str = Field(min_length=1, max_length=2_000)
    participants: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=MAX_PARTICIPANTS
    )
    mode: Literal["autonomous", "facilitated"] | None = None
    facilitator: str | None = Field(default=None, min_length=1, max_length=200)
    max_turns: int = Field(default=DEFAULT_MAX_TURNS, alias="maxTurns", ge=1, le=1000)
    request_id: str | None = Field(default=None, alias="requestId", max_length=200)


class DiscussionPost(_In):
    type: Literal["discussion.post"]
    session_id: UUID = Field(alias="sessionId")
    content: MessageText
    sender_name: str | None = Field(default=None, alias="senderName", max_length=200)
    request_id: str | None = Field(default=None, alias="requestId", max_length=200)


class DiscussionJoin(_In):
    type: Literal["discussion.join"]
    session_id: UUID = Field(alias="sessionId")
    agent: str = Field(min_length=1, max_length=200)
    request_id: str | None = Field(default=None, alias="requestId", max_length=200)


class InboxFollow(_In):
    type: Literal["inbox.subscribe", "inbox.unsubscribe"]


ClientMessage = (
    Ping
    | Subscribe
    | Unsubscribe
    | Chat
    | DiscussionStart
    | DiscussionPost
    | DiscussionJoin
    | InboxFollow
)
Incoming: TypeAdapter[ClientMessage] = TypeAdapter(
    Annotated[ClientMessage, Field(discriminator="type")]
)


def _dump(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, default=str)


def _error(code: str, message: str, request_id: str | None = None) -> str:
    body: dict[str, Any] = {"type": "error", "error": code, "message": message}
    if request_id is not None:
        body["requestId"] = request_id
    return _dump(body)


def _problem(exc: PydanticValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))


class Connection:
    """One WebSocket client: its outbox, subscriptions and running chats.

    `token` is the API token it was opened with (None: the open loopback mode, where
    everything is allowed); its scope decides which messages it may send.
    """

    def __init__(
        self,
        websocket: WebSocket,
        runtime: Runtime,
        hub: EventHub,
        discussions: DiscussionRunner | None = None,
        agent_mode: AgentModeRunner | None = None,
        token: ApiToken | None = None,
        inbox: InboxCounter | None = None,
    ) -> None:
        self.websocket = websocket
        self.inbox = inbox
        self.token = token
        self.agent_mode = agent_mode
        self.runtime = runtime
        self.hub = hub
        self.discussions = discussions or DiscussionRunner(runtime)
        self.id = str(uuid4())
        self.client = Client(name=self.id)
        self.chats: set[asyncio.Task[None]] = set()
        self.watchers: list[Watcher] = []  # the follow-ups this connection waits for
        self.notes: set[asyncio.Task[None]] = set()  # follow-ups' notices being sent

    async def serve(self) -> None:
        receiver = asyncio.create_task(self._receive())
        pump = asyncio.create_task(self._pump())
        dropped = asyncio.create_task(self.client.closed.wait())
        try:
            await asyncio.wait({receiver, pump, dropped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in self.watchers:
                self.runtime.approvals.follow_ups.unwatch(watcher)
            if self.inbox is not None:
                self.inbox.remove(self.client)
            for task in (receiver, pump, dropped):
                task.cancel()
            self.hub.unsubscribe(self.client)
            if self.client.close_code is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        self.websocket.close(self.client.close_code, self.client.close_reason),
                        1.0,
                    )
            self.client.drop(1000, "closed")  # chats still running stop sending

    async def _pump(self) -> None:
        """Send the outbox in order; a send that blocks only ever blocks this client."""
        outbox = self.client.outbox
        while True:
            message = await outbox.get()
            if self.client.closed.is_set():
                return
            await self.websocket.send_text(message)

    async def _receive(self) -> None:
        while True:
            try:
                text = await self.websocket.receive_text()
            except WebSocketDisconnect:
                return
            except (KeyError, RuntimeError):  # a binary frame or a closed socket
                if self.websocket.client_state.name != "CONNECTED":
                    return
                self.client.offer(_error("bad_request", "send JSON text frames"))
                continue
            await self.handle(text)

    async def handle(self, text: str) -> None:
        try:
            message = Incoming.validate_json(text)
        except PydanticValidationError as exc:
            code = (
                "bad_request" if exc.errors()[0]["type"] == "json_invalid" else "validation_error"
            )
            self.client.offer(_error(code, _problem(exc)))
            return
        try:
            if isinstance(message, Ping):
                self.client.offer('{"type":"pong"}')
            elif isinstance(message, Subscribe):
                await self.subscribe(str(message.session_id), message.after_seq)
            elif isinstance(message, Unsubscribe):
                self.hub.unsubscribe(self.client, str(message.session_id))
                self.client.offer(
                    _dump({"type": "unsubscribed", "sessionId": str(message.session_id)})
                )
            elif isinstance(message, InboxFollow):
                self.follow_inbox(message.type == "inbox.subscribe")
            elif isinstance(message, DiscussionStart | DiscussionPost | DiscussionJoin):
                self.may(Scope.chat, f"a {message.type!r} message")
                await self.discussion(message)
            else:
                self.may(Scope.chat, "a 'chat' message")
                self.start_chat(message)
        except OpenCrabError as exc:
            self.client.offer(_error(exc.code, str(exc), getattr(message, "request_id", None)))

    def follow_inbox(self, follow: bool) -> None:
        """Start (`inbox` messages with the count follow) or stop following the inbox."""
        if self.inbox is None:
            raise OpenCrabError("this server does not count the inbox (no HTTP role)")
        if follow:
            self.inbox.add(self.client)
        else:
            self.inbox.remove(self.client)
            self.client.offer('{"type":"inbox.unsubscribed"}')

    def may(self, needed: Scope, doing: str) -> None:
        """ForbiddenError unless the connection's token covers `needed`."""
        if self.token is not None and not self.token.scope.covers(needed):
            raise ForbiddenError(refusal(self.token, needed, doing))

    def _room_for(self, session_id: str) -> bool:
        """Whether one more session may be followed (refused with an error when not)."""
        sessions = set(self.client.traces.values()) | self.client.watching
        if session_id not in sessions and len(sessions) >= MAX_SUBSCRIPTIONS:
            self.client.offer(
                _error("too_many_subscriptions", f"at most {MAX_SUBSCRIPTIONS} sessions")
            )
            return False
        return True

    async def subscribe(self, session_id: str, after_seq: int | None) -> None:
        try:
            feed = session_feed(self.runtime, session_id)
        except NotFoundError as missing:  # perhaps an agent-mode session, else the error
            if self.agent_mode is None:
                raise
            try:
                agent_session = await run_blocking(self.agent_mode.service.get, session_id)
            except NotFoundError:
                raise missing from None
            if self._room_for(session_id):
                self.hub.watch(self.client, session_id)
                watched = {"type": "subscribed", "sessionId": session_id, "kind": "agentMode"}
                self.client.offer(_dump({**watched, "status": agent_session.status.value}))
            return
        if not self._room_for(session_id):
            return
        reply: dict[str, Any] = {"type": "subscribed", "sessionId": session_id}
        if feed.session.kind == "discussion":
            reply["participants"] = [
                {"agentId": p.agent_id, "name": p.name, "traceId": p.trace_id}
                for p in feed.participants
            ]
        seq = await self.hub.subscribe(self.client, session_id, feed.traces, feed.speakers)
        self.client.offer(_dump({**reply, "seq": seq}))
        if after_seq is not None and after_seq < seq:
            for at, trace, body in self.hub.history(feed.traces, after_seq=after_seq, upto_seq=seq):
                message = event_message(session_id, body.decode(), feed.speakers.get(trace), at)
                self.client.offer(message)

    async def discussion(self, message: DiscussionStart | DiscussionPost | DiscussionJoin) -> None:
        """Start, speak into or join a discussion (see the module docstring)."""
        request_id = message.request_id
        answer: dict[str, Any]
        if isinstance(message, DiscussionStart):
            started = await start_discussion(
                self.runtime,
                self.discussions,
                theme=message.theme,
                participants=message.participants,
                mode=message.mode,
                facilitator=message.facilitator,
                max_turns=message.max_turns,
            )
            state = describe(self.runtime, self.discussions, started)
            answer = {
                "type": "discussion.started",
                "sessionId": started.id,
                "discussion": _camel(state),
            }
            self.client.offer(_dump({**answer, "requestId": request_id}))
            await self.subscribe(started.id, None)
            return
        discussion = Discussion.load(self.runtime.db, str(message.session_id))
        if isinstance(message, DiscussionPost):
            speech = discussion.post(
                message.content, sender_id=self.id, sender_name=message.sender_name
            )
            self.runtime.wrote()
            said = discussion.transcript(after=speech.log_id - 1, limit=1)[0]
            answer = {
                "type": "discussion.posted",
                "message": message_response(said).model_dump(mode="json", by_alias=True),
            }
        else:
            agent = self.runtime.agents.get(message.agent)
            discussion.join(agent.id)
            self.hub.follow(discussion.id, discussion.trace_for(agent.id), agent.id)
            answer = {"type": "discussion.joined", "agentId": agent.id}
        self.client.offer(_dump({**answer, "sessionId": discussion.id, "requestId": request_id}))

    def start_chat(self, message: Chat) -> None:
        """Run a chat turn in the background, unless this connection runs its most already."""
        most = self.runtime.settings.gateway.rest.ws_max_turns_per_connection
        if len(self.chats) >= most:
            problem = (
                f"this connection already runs {most} turns at once, its most "
                "([gateway.rest] ws_max_turns_per_connection); send this again after a chat.done"
            )
            self.client.offer(_error("too_many_turns", problem, message.request_id))
            return
        task = asyncio.create_task(self.chat(message))
        self.chats.add(task)
        task.add_done_callback(self.chats.discard)

    async def chat(self, message: Chat) -> None:
        request_id = message.request_id or str(uuid4())
        offer = self.client.offer
        try:
            agent = self.runtime.agents.get(message.agent)
            session_id = None if message.session_id is None else str(message.session_id)
            async for step in self.runtime.turns.chat_steps(
                agent,
                message.content,
                session_id=session_id,
                source=WebSocketSource(connection_id=self.id),
                create=False,
                stream=True,
            ):
                if isinstance(step, TurnResult) and step.approval_id is not None:
                    await self._waiting(step.approval_id, request_id)
                if isinstance(step, TurnResult):
                    # the turn's slot frees before its chat.done goes out: a client that
                    # sends again on chat.done (as the too_many_turns error says) is never
                    # refused because the lease release after it has not finished yet
                    self.chats.discard(asyncio.current_task())
                offer(_dump({**step_json(step), "requestId": request_id}))
        except OpenCrabError as exc:
            offer(_error(exc.code, str(exc), request_id))
        except Exception:
            log.exception("websocket chat failed")
            offer(_error("internal_error", "the turn failed; see the server log", request_id))

    async def _waiting(self, approval_id: str, request_id: str) -> None:
        """Say which call waits and where to decide it; watch for the turn after it."""
        record = await run_blocking(self.runtime.approvals.get, approval_id)
        self.client.offer(
            _dump(
                {
                    "type": "approval.waiting",
                    "approvalId": record.id,
                    "sessionId": record.session_id,
                    "toolName": record.tool_name,
                    "arguments": record.arguments,
                    "notice": waiting_notice(record),
                    "requestId": request_id,
                }
            )
        )
        watcher = self._follow_up(request_id)
        self.watchers.append(watcher)
        self.runtime.approvals.follow_ups.watch(record.id, watcher)

    def _follow_up(self, request_id: str) -> Watcher:
        """A follow-up watcher: the closing steps of the turn that continued a chat this
        connection asked in, whichever process ran it."""

        def told(outcome: FollowUpOutcome) -> None:
            self.watchers.remove(told)
            if not outcome.steps:
                return  # dropped: the session ended meanwhile
            *before, last = outcome.steps
            for step in before:
                self.client.offer(_dump({**step, "requestId": request_id, "followUp": True}))
            done = {**last, "requestId": request_id, "followUp": True}
            held_again = last.get("approvalId")
            if not held_again:
                self.client.offer(_dump(done))
                return
            task = asyncio.create_task(self._then(self._waiting(held_again, request_id), done))
            self.notes.add(task)
            task.add_done_callback(self.notes.discard)

        return told

    async def _then(self, waiting: Any, done: dict[str, Any]) -> None:
        """Say that the follow-up held a call again, then send its chat.done."""
        with contextlib.suppress(OpenCrabError):
            await waiting
        self.client.offer(_dump(done))


def _camel(state: dict[str, Any]) -> dict[str, Any]:
    """A discussion's state (server.api.discussions.describe) in the API's JSON form."""
    return DiscussionResponse.model_validate(state).model_dump(mode="json", by_alias=True)


async def websocket_endpoint(websocket: WebSocket) -> None:
    app = websocket.app
    await websocket.accept(subprotocol=ws_subprotocol(websocket.scope))
    runner = getattr(app.state, "discussions", None)
    agent_mode = getattr(app.state, "agent_mode", None)
    state = websocket.scope.get("state", {})
    token: ApiToken | None = state.get("api_token")
    login_id: str | None = state.get("login_id")
    connection = Connection(
        websocket,
        app.state.runtime,
        app.state.hub,
        runner,
        agent_mode,
        token=token,
        inbox=getattr(app.state, "inbox_counter", None),
    )
    watch: TokenWatch | None = getattr(app.state, "token_watch", None)
    if token is None or watch is None:
        await connection.serve()
        return
    revoked = watch.watch(token.id, login_id)
    closer = asyncio.create_task(_close_when_revoked(revoked, connection.client))
    try:
        await connection.serve()
    finally:
        closer.cancel()
        watch.forget(token.id, revoked, login_id)


async def _close_when_revoked(revoked: asyncio.Event, client: Client) -> None:
    """Drop the connection (4401) once its token is revoked or its sign-in ended."""
    await revoked.wait()
    client.drop(UNAUTHORIZED, "bearer token revoked or signed out")


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.add_api_websocket_route("/api/ws", websocket_endpoint, name="websocket")
