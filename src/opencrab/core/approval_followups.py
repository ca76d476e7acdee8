"""The turn that continues a chat or a discussion once a person decided its held call.

A turn that ends on a held call (core/approvals.py) has no answer yet: its caller is told
so (`waiting_notice`: the approval, and where to decide it). Once a person decides the
session's last waiting call (core/approval_decisions.py: approved and run, or denied),
one more turn of the agent runs in that session, its message a note OpenCrab writes
saying what was decided (stored as a system line, not as a person's message); the call's
result is already in the history, so the model goes on from it. In a chat its reply is
stored like any other; in a discussion the participant whose call was held finishes its
turn (core/discussion.py, `Discussion.continue_turn`), and the discussion, which waits
while a call of it waits, goes on as it would have. A ticket has none: its scheduler
continues the resumed ticket (opencrab.tickets.approvals).

The follow-up is durable. The decision records it in the database in its own
transaction (store/repositories/approvals.py: `follow_up` "pending", and `answered_by` on
every decision of the session it answers); `FollowUps`, started in every process that
runs background work (`opencrab up`, headless or not, and `opencrab worker`), claims
pending follow-ups through their `follow-up:<approval id>` lease (store/leases.py), runs
the turn through the turn service and marks it done with the turn's closing steps (or
dropped, when the session ended or the agent is gone). A process that dies mid-way stops
renewing the lease and another takes it; before running, the session is checked: a
follow-up turn that already ran to its end (the process died before marking it done) is
not run again, one cut off mid-way runs again — so exactly one reaches its end.

Delivery does not depend on which process ran it: a gateway waiting for an answer (the
WebSocket that asked, server/api/ws.py; a chat gateway's conversation, gateway/serve.py)
`watch`es the approval it announced, and every process's FollowUps looks for the
follow-ups of the watched approvals that finished (every POLL_SECS, at once when one
finished here) and hands their outcome to the watcher.

Example:
    followups = FollowUps(runtime)
    followups.start()                          # claim, run, deliver until aclose()
    followups.watch(approval_id, on_answer)    # on_answer(FollowUpOutcome), once
    await followups.aclose()                   # at shutdown: those running stay pending
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from opencrab.core.discussion import Discussion
from opencrab.core.sessions import get_session
from opencrab.core.steps import EngineStep, Spoke, TurnFailed, TurnResult, step_json
from opencrab.errors import NotFoundError, OpenCrabError
from opencrab.events import AgentEvent, MessageEvent, ToolCallEvent, ToolResultEvent, UserEvent
from opencrab.messages import IncomingMessage, InternalSource, Sender
from opencrab.offload import run_blocking
from opencrab.store.leases import follow_up_key
from opencrab.store.repositories import approvals as repo
from opencrab.store.repositories.approvals import ApprovalRecord, FollowUpOutcome
from opencrab.store.types import utcnow

if TYPE_CHECKING:
    from opencrab.core.runtime_view import RuntimeView

__all__ = [
    "FOLLOW_UP",
    "FollowUpOutcome",
    "FollowUps",
    "Watcher",
    "follow_up_text",
    "is_follow_up",
    "waiting_notice",
]

log = logging.getLogger(__name__)

FOLLOW_UP = "approval"
"""The origin (InternalSource) of the message of a turn continuing after a decision."""

POLL_SECS = 1.0
"""How often a process looks for follow-ups to run and for finished ones to deliver."""

CONCURRENCY = 8
"""Follow-up turns one process runs at once."""

Watcher = Callable[[FollowUpOutcome], None]
"""Told the outcome of the follow-up answering a watched approval (once)."""


def waiting_notice(record: ApprovalRecord) -> str:
    """What the caller of a turn that held `record` is told: it waits, and where to decide."""
    return (
        f"{record.tool_name} waits for a person's approval (approval {record.id}). "
        f"Approve or deny it on this session's page in the dashboard "
        f"(/sessions/{record.session_id}) or with POST /api/approvals/{record.id}/approve "
        f"(or /deny); the answer then follows in this conversation."
    )


def follow_up_text(record: ApprovalRecord, kind: str = "chat") -> str:
    """The message of the turn that continues after the decision on `record`."""
    if record.status == "approved":
        done = f"A person approved your call to {record.tool_name}; it ran and its result is above."
    else:
        why = f" ({record.reason})" if record.reason else ""
        done = (
            f"A person denied your call to {record.tool_name}{why}; it did not run "
            "(its result above says so)."
        )
    if kind == "discussion":
        return done + " Finish your turn in the discussion from there."
    return done + " Continue the conversation from there: answer what was asked."


def follow_up_sender(approval_id: str) -> str:
    """The sender id of the follow-up's message (its user event names it: `ran_to_end`)."""
    return f"{FOLLOW_UP}:{approval_id}"


def is_follow_up(message: IncomingMessage) -> bool:
    """True for the message of a turn continuing after a decision."""
    source = message.source
    return isinstance(source, InternalSource) and source.origin == FOLLOW_UP


def closing_steps(steps: list[EngineStep]) -> list[dict[str, Any]]:
    """What a follow-up delivers of its turn: its speech or failure and its result."""
    return [step_json(s) for s in steps if isinstance(s, Spoke | TurnFailed | TurnResult)]


def ran_to_end(
    events: list[AgentEvent], sender: str, ends_turn: Callable[[str], bool], held: set[str]
) -> str | None:
    """Whether the follow-up turn whose message came from `sender` reached its end in this
    trace: its reply ("" when it ended without one), or None when it never started or was
    cut off mid-way (its process died). A turn ends with the agent's message (a reply, a
    speech, an error), a turn-ending action's result, or a call held again (`held`: the
    tool_call event ids of the session's approvals)."""
    started = None
    for index, event in enumerate(events):
        if isinstance(event, UserEvent) and (event.metadata or {}).get("sender") == sender:
            started = index
    if started is None:
        return None
    for event in events[started + 1 :]:
        if isinstance(event, MessageEvent):
            return event.content.text
        if isinstance(event, ToolCallEvent) and str(event.id) in held:
            return ""
        ended = isinstance(event, ToolResultEvent) and not event.content.is_error
        if ended and ends_turn(str((event.metadata or {}).get("name", ""))):
            return ""
    return None


class FollowUps:
    """Claims, runs and delivers follow-up turns in this process (the module docstring)."""

    def __init__(self, runtime: RuntimeView, *, poll_secs: float = POLL_SECS) -> None:
        self.runtime = runtime
        self.poll_secs = poll_secs
        self.running: dict[str, asyncio.Task[None]] = {}
        self.watchers: dict[str, list[Watcher]] = {}
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ the service
    def start(self) -> None:
        """Look for follow-ups to run and to deliver in the background, until `aclose`."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._loop(), name="approval-follow-ups")

    def wake(self) -> None:
        """Look now rather than at the next poll (a decision was taken, one finished)."""
        self._wake.set()

    async def aclose(self) -> None:
        """Stop; follow-up turns still running are cancelled (their turns record the
        interruption) and stay pending, for another process or the next start."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                await self.claim()
                await self.deliver()
            except Exception:
                log.exception("approval follow-ups: looking for work failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_secs)

    # ------------------------------------------------------------ delivering
    def watch(self, approval_id: str, watcher: Watcher) -> None:
        """Tell `watcher` the outcome of the follow-up answering `approval_id` once it has
        finished, in whichever process it ran."""
        self.watchers.setdefault(approval_id, []).append(watcher)
        self._wake.set()

    def unwatch(self, watcher: Watcher) -> None:
        """Forget `watcher` (its connection closed)."""
        for approval_id, found in list(self.watchers.items()):
            kept = [w for w in found if w is not watcher]
            if kept:
                self.watchers[approval_id] = kept
            else:
                del self.watchers[approval_id]

    async def deliver(self) -> int:
        """Hand the watchers the follow-ups that finished; how many were told."""
        if not self.watchers:
            return 0

        def read(ids: list[str]) -> dict[str, FollowUpOutcome]:
            with self.runtime.db.read() as conn:
                return repo.answered(conn, ids)

        finished = await run_blocking(read, sorted(self.watchers))
        told = 0
        for approval_id, outcome in finished.items():
            for watcher in self.watchers.pop(approval_id, []):
                try:
                    watcher(outcome)
                    told += 1
                except Exception:
                    log.exception("approval %s: delivering its follow-up failed", approval_id)
        return told

    # ------------------------------------------------------------ running
    async def claim(self) -> list[str]:
        """Claim pending follow-ups by lease (up to CONCURRENCY at once) and run them."""
        free = CONCURRENCY - len(self.running)
        if free <= 0:
            return []

        def due() -> list[str]:
            with self.runtime.db.read() as conn:
                return repo.due_follow_ups(conn, limit=free * 4)

        candidates = [a for a in await run_blocking(due) if a not in self.running]
        random.shuffle(candidates)  # processes looking at once rarely try the same one
        claimed: list[str] = []
        for approval_id in candidates:
            if len(claimed) >= free or self._stopping.is_set():
                break
            if await self.runtime.leases.acquire(follow_up_key(approval_id)):
                claimed.append(approval_id)
                self.running[approval_id] = asyncio.create_task(
                    self._run(approval_id), name=f"approval-follow-up-{approval_id}"
                )
        return claimed

    async def _run(self, approval_id: str) -> None:
        try:
            record = await run_blocking(self._get, approval_id)
            if record is None or record.follow_up != "pending":
                return  # settled meanwhile (another process ran it before this one claimed)
            try:
                status, steps = await self.follow_up(record)
            except OpenCrabError as exc:  # the session ended meanwhile, the agent was deleted
                log.warning("approval %s: the conversation did not continue: %s", record.id, exc)
                status, steps = "dropped", []
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: never tried again and again
                log.exception("approval %s: the follow-up turn failed", record.id)
                status, steps = "dropped", []
            await run_blocking(self._finish, record.id, status, steps)
            self.runtime.wrote()
            self._wake.set()  # deliver here at once
        finally:
            self.running.pop(approval_id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.runtime.leases.release(follow_up_key(approval_id)))

    def _get(self, approval_id: str) -> ApprovalRecord | None:
        with self.runtime.db.read() as conn:
            return repo.get(conn, approval_id)

    def _finish(
        self, approval_id: str, status: Literal["done", "dropped"], steps: list[dict[str, Any]]
    ) -> None:
        with self.runtime.db.write() as conn:
            repo.finish_follow_up(conn, approval_id, status, steps, at=utcnow())

    async def follow_up(
        self, record: ApprovalRecord
    ) -> tuple[Literal["done", "dropped"], list[dict[str, Any]]]:
        """Run the follow-up turn of `record` (a claimed one), unless it ran to its end
        already; its status and closing steps."""
        runtime = self.runtime
        try:
            session = await run_blocking(get_session, runtime.db, record.session_id)
        except NotFoundError:
            return "dropped", []
        if session.status != "active" or session.kind not in ("chat", "discussion"):
            return "dropped", []
        reply = await run_blocking(self._ran_to_end, record)
        if reply is not None:  # its process died after the turn, before marking it done
            result = TurnResult(record.session_id, record.trace_id, reply=reply or None)
            return "done", [step_json(result)]
        agent = await run_blocking(runtime.agents.get, record.agent_id)
        message = IncomingMessage.text(
            follow_up_text(record, session.kind),
            source=InternalSource(origin=FOLLOW_UP),
            sender=Sender(id=follow_up_sender(record.id)),
        )
        if session.kind == "discussion":
            discussion = await run_blocking(Discussion.load, runtime.db, record.session_id)
            steps = await discussion.continue_turn(runtime, agent, message, record.trace_id)
        else:
            steps = [
                step
                async for step in runtime.turns.steps(
                    agent, message, session_id=record.session_id, create=False, wait_busy=True
                )
            ]
        return "done", closing_steps(steps)

    def _ran_to_end(self, record: ApprovalRecord) -> str | None:
        """`ran_to_end` for `record`'s follow-up, read from its trace and session."""
        runtime = self.runtime
        events = runtime.engine.events.trace(record.trace_id)
        with runtime.db.read() as conn:
            held = {
                a.call_event_id
                for a in repo.list_approvals(conn, session_id=record.session_id, limit=10_000)
            }

        def ends_turn(name: str) -> bool:
            action = runtime.registry.get(name)
            return action is not None and action.ends_turn

        return ran_to_end(events, follow_up_sender(record.id), ends_turn, held)
