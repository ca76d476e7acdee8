"""A person's decision on a held tool call (core/approvals.py): approve runs it, deny
answers it with an error; either way the result is recorded as the call's tool result.

Deciding holds the session's turn (core/sessions.hold_turn: no turn runs there
meanwhile; another process running one → SessionBusy, nothing decided), then takes the
decision with a conditional update: of two people deciding one call at once exactly one
wins, the other gets AlreadyDecided (409) and nothing runs twice. Approved, the call
runs once with the agent's permissions as they are now; its result event (answering the
call's tool_call event), memory line, the action's own writes and the approval's
`result_event_id` commit in one transaction with the approval hooks' `decided` (a
ticket resumes, opencrab.tickets.approvals). The agent sees the result in its next
turn's history: a ticket's, which the scheduler runs; in an active chat or discussion
session, once its last waiting call is decided, the same transaction records a
follow-up, the turn that continues the session, which a process running background work
claims and runs at once (core/approval_followups.py).

Example:
    record = await runtime.approvals.decide(approval_id, approve=True, by="ops")
    record = await runtime.approvals.decide(other_id, approve=False, reason="not today")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.actions.base import ActionResult, TurnState
from opencrab.core.approval_followups import FollowUps, waiting_notice
from opencrab.core.approvals import approval_hooks
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.permissions import callable_actions
from opencrab.core.record_cap import cap_event, cap_log
from opencrab.core.sessions import hold_turn
from opencrab.core.tools import granted_tool_names
from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.events import ToolResultEvent, ToolResultPayload
from opencrab.offload import run_blocking
from opencrab.store.repositories import approvals as repo
from opencrab.store.repositories import sessions as sessions_repo
from opencrab.store.repositories.approvals import ApprovalRecord, ApprovalStatus
from opencrab.store.types import utcnow

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.core.runtime_view import RuntimeView

Write = Callable[[Connection], Any]  # an action's own store write (ActionContext.pending)

MAX_REASON = 2000
MAX_DECIDER = 200


class AlreadyDecided(ConflictError):
    """The approval was approved or denied already."""

    code = "already_decided"


def _uuid(value: str) -> str:
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise ValidationError(f"approval id {value!r} is not a UUID") from None


class ApprovalService:
    """Lists held calls and carries out a person's decision on one (module docstring)."""

    def __init__(self, runtime: RuntimeView) -> None:
        self.runtime = runtime
        self.db = runtime.db
        self.follow_ups = FollowUps(runtime)

    # ------------------------------------------------------------ reading
    def get(self, approval_id: str) -> ApprovalRecord:
        """The approval; NotFoundError when there is none."""
        with self.db.read() as conn:
            found = repo.get(conn, _uuid(approval_id))
        if found is None:
            raise NotFoundError(f"no approval {approval_id}")
        return found

    def notice(self, approval_id: str) -> str:
        """What a caller waiting on the turn that held this call is told (waiting_notice)."""
        return waiting_notice(self.get(approval_id))

    def list_approvals(
        self,
        *,
        session_id: str | None = None,
        status: ApprovalStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRecord]:
        """Approvals, oldest first, narrowed by session and status."""
        session = None if session_id is None else _uuid_session(session_id)
        with self.db.read() as conn:
            return repo.list_approvals(
                conn, session_id=session, status=status, limit=limit, offset=offset
            )

    # ------------------------------------------------------------ deciding
    async def decide(
        self, approval_id: str, *, approve: bool, by: str = "person", reason: str | None = None
    ) -> ApprovalRecord:
        """Approve (run the call) or deny it; its result is recorded as the tool result.

        NotFoundError for no such approval, AlreadyDecided when it was decided already,
        SessionBusy when another process runs a turn in its session (nothing decided).
        In an active chat or discussion session whose last waiting call this was, a
        follow-up turn is recorded with the decision and then continues the session
        (core/approval_followups.py).
        """
        reason = (reason or "").strip() or None
        by = by.strip() or "person"
        if reason is not None and len(reason) > MAX_REASON:
            raise ValidationError(f"a reason has at most {MAX_REASON} characters")
        if len(by) > MAX_DECIDER:
            raise ValidationError(f"who decided is named in at most {MAX_DECIDER} characters")
        record = await run_blocking(self.get, approval_id)
        runtime = self.runtime
        async with hold_turn(runtime.leases, record.session_id):
            decision = "approved" if approve else "denied"
            if not await run_blocking(self._claim, record.id, decision, by, reason):
                current = await run_blocking(self.get, record.id)
                raise AlreadyDecided(f"approval {record.id} was {current.status} already")
            agent = await run_blocking(runtime.agents.get, record.agent_id)
            writes: list[Write] = []
            if approve:
                result = await self._run(agent, record, writes)
            else:
                why = f": {reason}" if reason else ""
                result = ActionResult.fail(f"denied by a person{why}")
            decided = await run_blocking(self._record, agent, record, result, writes)
        runtime.wrote()
        if decided.follow_up == "pending":
            self.follow_ups.wake()  # this process claims it now when it runs the service
        return decided

    def _claim(self, approval_id: str, decision: str, by: str, reason: str | None) -> bool:
        with self.db.write() as conn:
            return repo.claim(
                conn,
                approval_id,
                "approved" if decision == "approved" else "denied",
                by=by,
                reason=reason,
                at=utcnow(),
            )

    async def _run(self, agent: Agent, record: ApprovalRecord, writes: list[Write]) -> ActionResult:
        """Run the approved call once, with what the agent may call now."""
        runtime = self.runtime
        ctx = runtime.action_context(agent, record.session_id)
        ctx.turn = TurnState(trace_id=record.trace_id)
        allowed = await run_blocking(self._allowed, agent)
        ctx.pending = []  # the action's own writes join the result's transaction
        try:
            return await runtime.registry.dispatch(
                record.tool_name, record.arguments, ctx, allowed=allowed
            )
        finally:
            writes.extend(ctx.pending or [])
            ctx.pending = None

    def _allowed(self, agent: Agent) -> set[str]:
        active = self.runtime.engine.skills_for(agent).get_active_skills()
        return callable_actions(active, granted_tool_names(self.db, agent.id), agent.role)

    def _record(
        self, agent: Agent, record: ApprovalRecord, result: ActionResult, writes: list[Write]
    ) -> ApprovalRecord:
        """The call's result event and memory line, the action's writes, the approval's
        result and the hooks, in one transaction."""
        runtime = self.runtime
        cap = runtime.settings.agent.max_event_bytes
        events = runtime.engine.events
        output = result.output()
        session = sessions_repo.get_session(self.db, record.session_id)
        continues = (
            session is not None
            and session.kind in ("chat", "discussion")
            and session.status == "active"
        )
        with self.db.write() as conn:
            event = ToolResultEvent(
                id=uuid4(),
                trace_id=UUID(record.trace_id),
                parent_id=events.last_id(record.trace_id, conn=conn),
                timestamp=utcnow(),
                content=ToolResultPayload(
                    output=output,
                    tool_call_id=UUID(record.call_event_id),
                    is_error=not result.success,
                ),
                metadata={**result.metadata, "call_id": record.call_id, "name": record.tool_name},
            )
            events.append_many([cap_event(event, cap)], conn=conn)
            line = SessionLog(
                session_id=record.session_id,
                log_type="action",
                content=f"{record.tool_name}: {output[:500]}",
                event_id=str(event.id),
                metadata={
                    "action": record.tool_name,
                    "success": result.success,
                    "approval": record.id,
                },
            )
            MemoryManager(self.db, agent.id).append_session_logs([cap_log(line, cap)], conn=conn)
            for write in writes:
                write(conn)
            repo.set_result(conn, record.id, str(event.id))
            if continues and repo.count_pending(conn, record.session_id) == 0:
                repo.request_follow_up(conn, record.id, record.session_id)
            decided = repo.get(conn, record.id)
            assert decided is not None
            for hook in approval_hooks():
                hook.decided(conn, decided)
        return decided


def _uuid_session(value: str) -> str:
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise ValidationError(f"session id {value!r} is not a UUID") from None
