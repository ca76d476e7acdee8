"""The turn service: the only way an agent's turn runs.

See docs/architecture.md, "Runtime and the turn service".

Every gateway (REST, WebSocket, `/v1`, the CLI, chat gateways built in or from plugins),
discussions, the heartbeat and the ticket scheduler start turns here; agent mode will too.
For each turn the service

1. takes the session's turn — this process's turn lock, then the session's lease in the
   store (sessions.hold_turn): another process running a turn there raises SessionBusy
   (409 `session_busy`), and nothing is stored — or, when the caller asks (`wait_busy`,
   seed 002's `POST /api/sessions/{id}/messages`), that turn's end is waited for;
2. resolves and validates the session under it: a chat turn's session is the agent's own
   active chat session (created when new, if the caller allows it); a discussion turn's
   is an active discussion session, a ticket turn's an active session of a ticket of the
   agent (tickets/scheduler.py);
3. drives the engine (SkillEngine.run), passing each step on as it is yielded — every
   step is durable then and carries the ids of the rows it wrote (core/steps.py), so no
   caller reads back what the engine just wrote;
4. tells the listeners: `listeners` see every step of every turn with the turn it
   belongs to; `on_write` (the live event feed's nudge) is called after each step.

Example:
    async for step in runtime.turns.steps(agent, message, session_id=sid, stream=True):
        print(step_json(step))
    result = await runtime.turns.chat(agent, "hello")

A caller with bookkeeping of its own to do under the same lease (a discussion advances
its turn counter) holds the session itself:

    async with runtime.turns.hold(agent, session_id, kind="discussion") as turn:
        result = await turn.run(message, trace_id=..., turn_number=...)
        ...  # still holding the session
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID, uuid4

from opencrab.core.agent import Agent
from opencrab.core.engine import SkillEngine
from opencrab.core.sessions import (
    ensure_chat_session,
    hold_turn,
    open_chat_session,
    session_state,
)
from opencrab.core.steps import EngineStep, TurnResult
from opencrab.errors import ValidationError
from opencrab.messages import CliSource, IncomingMessage, MessageSource, Sender, check_message
from opencrab.store import Database
from opencrab.store.lease_keeper import LeaseKeeper

SessionKind = Literal["chat", "discussion", "ticket"]


@dataclass(frozen=True)
class TurnInfo:
    """Which turn a step belongs to, as listeners see it."""

    agent: Agent
    session_id: str
    kind: SessionKind
    message: IncomingMessage


TurnListener = Callable[[TurnInfo, EngineStep], None]


class TurnService:
    """Runs turns: session, lease, engine, listeners (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        engine: SkillEngine,
        leases: LeaseKeeper,
        on_write: list[Callable[[], None]] | None = None,
    ) -> None:
        self.db = db
        self.engine = engine
        self.leases = leases
        self.listeners: list[TurnListener] = []
        self.on_write: list[Callable[[], None]] = on_write if on_write is not None else []

    # ------------------------------------------------------------ starting a turn
    async def steps(
        self,
        agent: Agent,
        message: IncomingMessage,
        *,
        session_id: str | None = None,
        kind: SessionKind = "chat",
        create: bool = True,
        stream: bool = False,
        max_tokens: int | None = None,
        wait_busy: bool = False,
        **engine_options: Any,
    ) -> AsyncIterator[EngineStep]:
        """One turn of `agent` answering `message` in a session; its steps, the last a
        TurnResult.

        `session_id` None starts a new chat session; a chat session named but not stored
        is created when `create` (else NotFoundError). `stream` passes the model's text on
        as TextDelta steps; `max_tokens` caps each of the turn's model calls.
        `engine_options` go to SkillEngine.run (task_type, purpose, trace_id, turn_number).
        `wait_busy` waits for another process's turn in the session to end instead of
        raising SessionBusy.
        """
        async with self.hold(
            agent, session_id, kind=kind, create=create, wait_busy=wait_busy
        ) as turn:
            async for step in turn.steps(
                message, stream=stream, max_tokens=max_tokens, **engine_options
            ):
                yield step

    async def run(self, agent: Agent, message: IncomingMessage, **options: Any) -> TurnResult:
        """Run a turn (see `steps`) to its end and return its result."""
        return _result([step async for step in self.steps(agent, message, **options)])

    async def chat_steps(
        self,
        agent: Agent,
        text: str,
        *,
        session_id: str | None = None,
        source: MessageSource | None = None,
        sender: Sender | None = None,
        create: bool = True,
        stream: bool = False,
        max_tokens: int | None = None,
        wait_busy: bool = False,
    ) -> AsyncIterator[EngineStep]:
        """A chat turn for a text message (see `steps`); the source defaults to the CLI.

        `text` must follow the message rules (opencrab.messages.check_message): every
        gateway refuses a blank or too long message before it gets here, and so does this.
        """
        check_message(text)
        create = create or session_id is None  # a new session
        session_id = _session_key(session_id) or str(uuid4())
        message = IncomingMessage.text(
            text, source=source or CliSource(session_id=session_id), sender=sender
        )
        async for step in self.steps(
            agent,
            message,
            session_id=session_id,
            create=create,
            stream=stream,
            max_tokens=max_tokens,
            wait_busy=wait_busy,
        ):
            yield step

    async def chat(self, agent: Agent, text: str, **options: Any) -> TurnResult:
        """Run a chat turn (see `chat_steps`) to its end and return its result."""
        return _result([step async for step in self.chat_steps(agent, text, **options)])

    @asynccontextmanager
    async def hold(
        self,
        agent: Agent,
        session_id: str | None,
        *,
        kind: SessionKind = "chat",
        create: bool = True,
        wait_busy: bool = False,
    ) -> AsyncIterator[HeldSession]:
        """Hold a session for a turn (lock, lease; SessionBusy when another process runs
        one there, unless `wait_busy`: then its end is waited for), validated for `agent`
        and `kind`; the turn runs through what it yields."""
        if session_id is None and kind != "chat":
            raise ValidationError(f"a {kind} turn needs its session")
        key = _session_key(session_id) or str(uuid4())
        async with hold_turn(self.leases, key, wait=wait_busy):
            await self.db.run(self._resolve, agent, key, kind, create or session_id is None)
            yield HeldSession(self, agent, key, kind)

    def _resolve(self, agent: Agent, session_id: str, kind: SessionKind, create: bool) -> None:
        """Check the session may take a turn of `agent` (ValidationError, NotFoundError)."""
        if kind in ("discussion", "ticket"):  # their own code made the session: never created
            row = session_state(self.db, session_id)  # one short read: kind, agent, status
            if row.kind != kind:
                raise ValidationError(f"session {session_id} is a {row.kind} session")
            if row.status != "active":
                raise ValidationError(f"{kind} session {session_id} is {row.status}")
            if kind == "ticket" and str(row.agent_id) != agent.id:
                raise ValidationError(f"session {session_id} belongs to another agent")
            return
        if create:
            ensure_chat_session(self.db, agent.id, session_id)  # created when new
        state = open_chat_session(self.db, session_id)  # NotFoundError; an active chat
        if str(state.agent_id) != agent.id:
            raise ValidationError(f"session {session_id} belongs to another agent")


@dataclass
class HeldSession:
    """A session held for a turn (TurnService.hold): run the turn through it."""

    service: TurnService
    agent: Agent
    session_id: str
    kind: SessionKind

    async def steps(self, message: IncomingMessage, **options: Any) -> AsyncIterator[EngineStep]:
        """The turn's steps (SkillEngine.run with `options`); listeners see each one."""
        service = self.service
        info = TurnInfo(self.agent, self.session_id, self.kind, message)
        async for step in service.engine.run(
            self.agent, message, session_id=self.session_id, **options
        ):
            for listener in service.listeners:
                listener(info, step)
            for wrote in service.on_write:
                wrote()
            yield step

    async def run(self, message: IncomingMessage, **options: Any) -> TurnResult:
        """Run the turn to its end and return its result."""
        return _result([step async for step in self.steps(message, **options)])


def _session_key(session_id: str | None) -> str | None:
    """The session id in its one spelling (ValidationError when it is not a UUID)."""
    if session_id is None:
        return None
    try:
        return str(UUID(session_id))
    except ValueError:
        raise ValidationError(f"session id {session_id!r} is not a UUID") from None


def _result(steps: list[EngineStep]) -> TurnResult:
    result = steps[-1]
    assert isinstance(result, TurnResult), "a turn ends with its TurnResult"
    return result
