"""The ticket scheduler (docs/architecture.md, "Leases"): runs tickets by lease.

`opencrab up` and `opencrab worker` each run one (`[tickets] enabled`). It looks for
work when a ticket becomes runnable — created, reset, resumed, answered — (a commit that
signals store.signals.TICKETS: at once in this process, through PostgreSQL's
LISTEN/NOTIFY from any other), whenever one of its runs ends, and otherwise every
`[tickets] poll_secs` (a ticket whose process died, a write from another process on
SQLite). Then it looks for `pending` tickets and `running` ones whose lease is free — a
resumed ticket, or one whose process died — and claims them through their `ticket:<id>`
leases (store/leases.py; as many as there is room for in one transaction), up to
`[tickets] concurrency` at once; any number of processes share the work, each ticket
run by one of them. A claimed ticket

1. is started (`pending`: a new session, in the transaction that reads it,
   tickets/service.begin_run) or continued (`running`: the same session; a tool call
   left in flight by a dead process is settled first, tickets/recovery.py, which may
   suspend it for a person);
2. runs turn after turn of its agent through the turn service in that session, with the
   ticket actions (tickets/actions.py) callable: the first turn's message is the task
   (the ticket's context: goal, constraints; and its params), later ones a nudge to go
   on, or after a person's answer (already in the history) a note to carry on;
3. stops when the ticket is no longer `running` in that session (the agent completed,
   failed or asked a person, a person reset or deleted it), when a limit of the
   stretch is reached (suspended with the reason, for a person to answer — which starts
   a new stretch — or reset), or when the agent errors out (failed, the reason as
   `error_message`, the session `failed`). `after_turn` is the one place deciding.

Limits (`[tickets]` max_turns, max_wall_secs, max_cost_usd; a ticket's params may set its
own as `maxTurns`, `maxWallSecs`, `maxCostUsd`) count one stretch of running in one
process: from the claim until the run stops; maxCostUsd is also checked before every
model call (core/budgets.py), so a stretch never exceeds it by more than one call. The
agent's and the fleet's budgets apply too: reaching one suspends the ticket like a limit.

Example:
    scheduler = TicketScheduler(runtime)
    scheduler.start()
    ...
    await scheduler.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from opencrab.config.models import TicketsSection
from opencrab.core.budgets import CostCap
from opencrab.core.runtime import Runtime
from opencrab.core.steps import LlmReplied, TurnResult
from opencrab.core.work_spans import work_span
from opencrab.errors import ConflictError, NotFoundError, OpenCrabError, ValidationError
from opencrab.messages import IncomingMessage, InternalSource, Sender
from opencrab.offload import run_blocking
from opencrab.store import signals
from opencrab.store.leases import ticket_key
from opencrab.store.repositories.tickets import TicketRecord, TicketState
from opencrab.tickets import service
from opencrab.tickets.actions import TICKET_ACTIONS
from opencrab.tickets.recovery import settle_interrupted_calls
from opencrab.tickets.states import MoveName

log = logging.getLogger(__name__)

LIMIT_PARAMS = {
    "max_turns": ("maxTurns", "max_turns"),
    "max_wall_secs": ("maxWallSecs", "max_wall_secs"),
    "max_cost_usd": ("maxCostUsd", "max_cost_usd"),
}
"""Each limit's names in a ticket's params (camelCase, or snake_case)."""

TASK = (
    "You are working on a ticket: carry it out with your actions.\n"
    "Record your plan as steps (add_step), and update each (update_step) with its status "
    "and result as you go. When it is done call complete_ticket with a summary; if you "
    "need a person's decision or information call ask_human; if it cannot be done call "
    "fail_ticket with the reason.\n\n"
)
NUDGE = (
    "Go on with the ticket. Finish with complete_ticket, ask a person with ask_human, or "
    "give up with fail_ticket; a plain reply does not end the ticket."
)
CONTINUE = (
    "Continue the ticket from where it stopped (its steps and history are above); finish "
    "with complete_ticket, ask_human or fail_ticket."
)


@dataclass(frozen=True)
class Limits:
    """A stretch's limits: turns, seconds of wall time, dollars (None: no cost limit)."""

    max_turns: int
    max_wall_secs: float
    max_cost_usd: float | None

    @classmethod
    def of(cls, section: TicketsSection, params: dict[str, Any]) -> Limits:
        """The configured limits, with the ticket's params' own where given
        (ValidationError naming a bad one)."""
        values: dict[str, Any] = {
            "max_turns": section.max_turns,
            "max_wall_secs": section.max_wall_secs,
            "max_cost_usd": section.max_cost_usd,
        }
        for field, names in LIMIT_PARAMS.items():
            given = next((params[n] for n in names if n in params), None)
            if given is None:
                continue
            if isinstance(given, bool) or not isinstance(given, int | float) or given <= 0:
                raise ValidationError(f"params.{names[0]} must be a positive number, not {given!r}")
            if field == "max_turns" and int(given) != given:
                raise ValidationError(f"params.{names[0]} must be a whole number, not {given!r}")
            values[field] = int(given) if field == "max_turns" else float(given)
        return cls(**values)


@dataclass
class Stretch:
    """What one stretch of running has used so far."""

    limits: Limits
    started: float
    turns: int = 0
    cost_usd: float = 0.0

    def count(self, cost_usd: float) -> None:
        """One more turn, which cost `cost_usd`."""
        self.turns += 1
        self.cost_usd += cost_usd

    def exceeded(self, now: float) -> str | None:
        """The limit reached, as the reason a person reads; None while within them."""
        limits = self.limits
        if self.turns >= limits.max_turns:
            return f"turn limit reached: {self.turns} turns (maxTurns {limits.max_turns})"
        spent = now - self.started
        if spent >= limits.max_wall_secs:
            return f"wall time limit reached: {spent:.0f} s (maxWallSecs {limits.max_wall_secs:g})"
        if limits.max_cost_usd is not None and self.cost_usd >= limits.max_cost_usd:
            cap = limits.max_cost_usd
            return f"cost limit reached: ${self.cost_usd:.4f} (maxCostUsd {cap:g})"
        return None


@dataclass(frozen=True)
class Next:
    """What happens after a turn: go on (with `message`), or stop (the ticket was moved,
    or is to be suspended / failed with `reason`)."""

    action: Literal["continue", "stop", "suspend", "fail"]
    message: str = ""
    reason: str = ""


def after_turn(
    result: TurnResult, ticket: TicketRecord | TicketState | None, session_id: str
) -> Next:
    """Why the turn stopped, and what the scheduler does next — the one place deciding.

    `ticket` is as stored after the turn (None: deleted). A ticket no longer running in
    this session (completed, failed, asked a person, suspended for an approval, reset,
    deleted) stops the run; an error of the turn fails the ticket, except the agent's
    daily budget, which suspends it for a person; a turn that ended any other way (a
    plain reply, the iteration cap) is nudged on.
    """
    if ticket is None or ticket.status != "running" or ticket.current_session_id != session_id:
        return Next("stop")
    if result.error is not None:
        reason = f"{result.error.error}: {result.error.message}"
        if result.error.error == "budget_exceeded":
            return Next("suspend", reason=reason)
        return Next("fail", reason=reason)
    return Next("continue", message=NUDGE)


def task_message(ticket: TicketRecord) -> str:
    """The first turn's message: the ticket's context (goal, constraints, the rest) and params."""
    context = dict(ticket.context)
    lines = [TASK, f"Ticket: {ticket.id}"]
    goal = context.pop("goal", None)
    if goal:
        lines.append(f"Goal: {goal}")
    constraints = context.pop("constraints", None)
    if isinstance(constraints, list) and constraints:
        lines.append("Constraints:\n" + "\n".join(f"- {c}" for c in constraints))
    elif constraints:
        lines.append(f"Constraints: {constraints}")
    if context:
        lines.append("Context: " + _json(context))
    if ticket.params:
        lines.append("Params: " + _json(ticket.params))
    if ticket.steps:  # a reset ticket keeps its steps
        done = "\n".join(f"- [{s.index}] {s.title} ({s.status})" for s in ticket.steps)
        lines.append("Steps recorded by an earlier run:\n" + done)
    return "\n".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class TicketScheduler:
    """Claims tickets by lease and runs them (see the module docstring)."""

    def __init__(self, runtime: Runtime, section: TicketsSection | None = None) -> None:
        self.runtime = runtime
        self.section = section or runtime.settings.tickets
        self.running: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._unhook: Callable[[], None] | None = None

    def start(self) -> None:
        """Run the claiming loop in the background of the running event loop, woken by
        the tickets made runnable in this process and (PostgreSQL) in any other."""
        if self._task is not None:
            return
        self._event_loop = asyncio.get_running_loop()
        db = self.runtime.db
        self._unhook = db.on_commit(signals.TICKETS, self.wake)
        listening = signals.listen(db, signals.TICKETS, self.wake)
        if listening is not None:
            self._listener = asyncio.create_task(listening, name="ticket-scheduler-listen")
        self._task = asyncio.create_task(self._loop(), name="ticket-scheduler")

    def wake(self) -> None:
        """Look for work now rather than at the next poll (from any thread)."""
        loop = self._event_loop
        if loop is None or _in_loop(loop):
            self._wake.set()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    async def stop(self) -> None:
        """Stop claiming; runs under way are cancelled (their turns record the
        interruption), their tickets stay `running` and their leases are let go of, so
        another process (or the next start) continues them."""
        self._stopping.set()
        self._wake.set()
        if self._unhook is not None:
            self._unhook()
            self._unhook = None
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self._task is not None:
            await self._task
            self._task = None
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                await self.claim()
            except Exception:
                log.exception("looking for tickets failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.section.poll_secs)

    async def claim(self) -> list[str]:
        """Claim free tickets up to the concurrency and start running them; their ids."""
        free = self.section.concurrency - len(self.running)
        if free <= 0:
            return []
        db = self.runtime.db
        found = await db.run(service.runnable_tickets, db, limit=free * 4)
        candidates = [t for t in found if t not in self.running]
        random.shuffle(candidates)  # processes polling at once rarely try the same one
        claimed: list[str] = []
        # as many at a time as there is room for, each batch one lease transaction: a
        # lease another process took meanwhile leaves room for the next batch
        while candidates and len(claimed) < free and not self._stopping.is_set():
            batch = candidates[: free - len(claimed)]
            del candidates[: len(batch)]
            taken = await self.runtime.leases.acquire_some([ticket_key(t) for t in batch])
            for ticket_id in batch:
                if ticket_key(ticket_id) in taken:
                    claimed.append(ticket_id)
                    self.running[ticket_id] = asyncio.create_task(
                        self._run(ticket_id), name=f"ticket-{ticket_id}"
                    )
        return claimed

    async def _run(self, ticket_id: str) -> None:
        try:
            await self.run_ticket(ticket_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, or the store failing: the ticket says so
            log.exception("ticket %s: the run failed", ticket_id)
            with contextlib.suppress(OpenCrabError):
                reason = f"the scheduler failed: {type(exc).__name__}: {exc}"
                await self.runtime.db.run(service.fail_ticket, self.runtime.db, ticket_id, reason)
        finally:
            self.running.pop(ticket_id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.runtime.leases.release(ticket_key(ticket_id)))
            self._wake.set()

    async def run_ticket(self, ticket_id: str) -> None:
        """Run one claimed ticket until it stops (see the module docstring)."""
        db = self.runtime.db
        was = await db.run(service.begin_run, db, ticket_id)  # a pending one started
        ticket = was.ticket
        if was.started:
            message = task_message(ticket)
        elif ticket.status == "running" and ticket.current_session_id is not None:
            suspended = await run_blocking(
                settle_interrupted_calls, db, ticket.current_session_id, ticket.agent_id, ticket_id
            )
            if suspended:
                return
            message = CONTINUE
        else:
            return  # moved since it was listed
        session_id = ticket.current_session_id
        assert session_id is not None  # a running ticket has its session
        try:
            limits = Limits.of(self.section, ticket.params)
            agent = await db.run(self.runtime.agents.get, ticket.agent_id)
        except (ValidationError, NotFoundError) as exc:
            await db.run(service.fail_ticket, db, ticket_id, str(exc))
            return
        stretch = Stretch(limits, time.monotonic())
        # the run is a span in its session's trace: its turns hang below it (telemetry)
        with work_span("ticket", ticket_id, trace_id=session_id, agent_id=agent.id) as span:
            await self._stretch(ticket_id, session_id, agent, limits, stretch, message)
            span.set("opencrab.ticket.turns", stretch.turns)

    async def _stretch(
        self,
        ticket_id: str,
        session_id: str,
        agent: Any,
        limits: Limits,
        stretch: Stretch,
        message: str,
    ) -> None:
        """Turns of the ticket's agent until the ticket stops, is suspended or fails."""
        db = self.runtime.db
        while True:
            reason = stretch.exceeded(time.monotonic())
            if reason is not None:
                await self._stop(ticket_id, session_id, Next("suspend", reason=reason))
                return
            try:
                cap = None  # maxCostUsd is also checked before each call (core/budgets.py)
                if limits.max_cost_usd is not None:
                    cap = CostCap(limits.max_cost_usd, stretch.cost_usd, ticket_id=ticket_id)
                result, cost = await self._turn(agent, session_id, message, cap)
            except ConflictError:  # the session's turn is still leased (a dead process's)
                return  # the ticket stays running: claimed again once that lease expires
            except (ValidationError, NotFoundError):  # the session is no longer active
                return
            stretch.count(cost)
            found = await db.run(service.ticket_state, db, ticket_id)
            step = after_turn(result, found, session_id)
            if step.action != "continue":
                await self._stop(ticket_id, session_id, step)
                return
            message = step.message

    async def _turn(
        self, agent: Any, session_id: str, text: str, cap: CostCap | None
    ) -> tuple[TurnResult, float]:
        """One turn of the ticket's agent in its session; its result and cost."""
        message = IncomingMessage.text(
            text, source=InternalSource(origin="ticket"), sender=Sender(id="ticket")
        )
        cost = 0.0
        result: TurnResult | None = None
        async for step in self.runtime.turns.steps(
            agent,
            message,
            session_id=session_id,
            kind="ticket",
            task_type="ticket",
            extra_actions=TICKET_ACTIONS,
            cost_cap=cap,
        ):
            if isinstance(step, LlmReplied):
                cost += step.cost_usd or 0.0
            elif isinstance(step, TurnResult):
                result = step
        assert result is not None
        return result, cost

    async def _stop(self, ticket_id: str, session_id: str, step: Next) -> None:
        """Suspend or fail the ticket as `step` says (a note in its session says why)."""
        if step.action == "stop":
            return
        db = self.runtime.db

        def write() -> None:
            with db.write() as conn:
                found = service.ticket_session_in(conn, session_id)
                if found is None or found.status != "active":
                    return  # a person moved it meanwhile: theirs is the last word
                move: MoveName = "suspend" if step.action == "suspend" else "fail"
                note = ("Suspended: " if move == "suspend" else "Failed: ") + step.reason
                service.say_in(conn, db, session_id, found.agent_id, note, notice=True)
                service.move_in(conn, ticket_id, move, step.reason)

        with contextlib.suppress(OpenCrabError):
            await db.run(write)


def start_tickets(runtime: Runtime) -> TicketScheduler | None:
    """A started ticket scheduler, or None when `[tickets] enabled` is false."""
    if not runtime.settings.tickets.enabled:
        return None
    scheduler = TicketScheduler(runtime)
    scheduler.start()
    return scheduler


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # a thread without a loop (a write run off the event loop)
        return False
