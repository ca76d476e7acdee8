"""The turn that continues a chat once a person decided its held call.

A chat turn that ends on a held call (core/approvals.py) has no answer yet: its caller is
told so (`waiting_notice`: the approval, and where to decide it). Once a person decides
the session's last pending call (core/approval_decisions.py: approved and run, or denied),
one more turn of the agent runs in that session, its message a note OpenCrab writes
saying what was decided (stored as a system line, not as a person's message); the call's
result is already in the history, so the model goes on from it and its reply is stored
in the session like any other — as a ticket's scheduler continues a resumed ticket
(opencrab.tickets.approvals). A discussion's participant sees the result in its next
turn of the discussion; nothing runs here for it.

The follow-up runs in the background of the process that took the decision, through the
turn service; its turn's message comes from `InternalSource(origin=FOLLOW_UP)`, which is
how gateways tell it apart among the turn listeners' steps to deliver the answer where a
channel exists (the WebSocket that asked: server/api/ws.py; a chat gateway's
conversation: gateway/serve.py).

Example:
    followups = FollowUps(runtime)
    followups.start(decided)        # after the decision committed; None when not a chat
    await followups.aclose()        # at shutdown: cancels those still running
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from opencrab.errors import OpenCrabError
from opencrab.messages import IncomingMessage, InternalSource, Sender
from opencrab.offload import run_blocking
from opencrab.store.repositories import approvals as repo
from opencrab.store.repositories import sessions as sessions_repo
from opencrab.store.repositories.approvals import ApprovalRecord

if TYPE_CHECKING:
    from opencrab.core.runtime_view import RuntimeView

log = logging.getLogger(__name__)

FOLLOW_UP = "approval"
"""The origin (InternalSource) of the message of a turn continuing after a decision."""


def waiting_notice(record: ApprovalRecord) -> str:
    """What the caller of a turn that held `record` is told: it waits, and where to decide."""
    return (
        f"{record.tool_name} waits for a person's approval (approval {record.id}). "
        f"Approve or deny it on this session's page in the dashboard "
        f"(/sessions/{record.session_id}) or with POST /api/approvals/{record.id}/approve "
        f"(or /deny); the answer then follows in this conversation."
    )


def follow_up_text(record: ApprovalRecord) -> str:
    """The message of the turn that continues after the decision on `record`."""
    if record.status == "approved":
        done = f"A person approved your call to {record.tool_name}; it ran and its result is above."
    else:
        why = f" ({record.reason})" if record.reason else ""
        done = (
            f"A person denied your call to {record.tool_name}{why}; it did not run "
            "(its result above says so)."
        )
    return done + " Continue the conversation from there: answer what was asked."


def is_follow_up(message: IncomingMessage) -> bool:
    """True for the message of a turn continuing after a decision."""
    source = message.source
    return isinstance(source, InternalSource) and source.origin == FOLLOW_UP


class FollowUps:
    """Starts and keeps the follow-up turns of this process (see the module docstring)."""

    def __init__(self, runtime: RuntimeView) -> None:
        self.runtime = runtime
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, record: ApprovalRecord) -> asyncio.Task[None] | None:
        """Continue `record`'s session in the background, if it is a chat session with no
        other call still waiting; the task (None when nothing is to run)."""
        if record.status == "pending":
            return None
        task = asyncio.create_task(self._run(record), name=f"approval-follow-up-{record.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _due(self, record: ApprovalRecord) -> bool:
        db = self.runtime.db
        session = sessions_repo.get_session(db, record.session_id)
        if session is None or session.kind != "chat" or session.status != "active":
            return False
        with db.read() as conn:
            return repo.count_pending(conn, record.session_id) == 0

    async def _run(self, record: ApprovalRecord) -> None:
        runtime = self.runtime
        try:
            if not await run_blocking(self._due, record):
                return
            agent = await run_blocking(runtime.agents.get, record.agent_id)
            message = IncomingMessage.text(
                follow_up_text(record),
                source=InternalSource(origin=FOLLOW_UP),
                sender=Sender(id=FOLLOW_UP),
            )
            await runtime.turns.run(agent, message, session_id=record.session_id, create=False)
        except asyncio.CancelledError:
            raise
        except OpenCrabError as exc:  # the session ended meanwhile, the agent was deleted
            log.warning("approval %s: the conversation did not continue: %s", record.id, exc)
        except Exception:
            log.exception("approval %s: the follow-up turn failed", record.id)

    async def aclose(self) -> None:
        """Cancel the follow-up turns still running (their session keeps the result)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
