"""Tool approvals on a ticket's session (issue 20 "Approvals"): the ticket waits for them.

Registered as an approval hook (opencrab.core.approvals): when a turn in a `running`
ticket's session holds a call for a person, ticket and session become `suspended` in the
same transaction as the pending approval; when the session's last pending call is
decided (approved and run, or denied), the ticket resumes — `running`, the SAME session
`active` — for the scheduler to continue with the call's result in its history.
A chat session has no ticket: nothing happens here.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from opencrab.plugins import hookimpl
from opencrab.store.repositories import approvals
from opencrab.store.repositories import tickets as repo
from opencrab.store.repositories.approvals import ApprovalRecord
from opencrab.tickets.service import move_in


class TicketApprovals:
    """Suspends a ticket while its session has a call waiting for a person."""

    def held(self, conn: Connection, record: ApprovalRecord) -> None:
        """A running ticket's session held a call: ticket and session `suspended`."""
        session = repo.ticket_session(conn, record.session_id)
        if session is None or session.status != "active":
            return
        ticket = repo.lock_ticket(conn, session.ticket_id)
        if ticket.status == "running":
            move_in(conn, ticket.id, "suspend")

    def decided(self, conn: Connection, record: ApprovalRecord) -> None:
        """The session's last pending call was decided: ticket `running`, session `active`."""
        session = repo.ticket_session(conn, record.session_id)
        if session is None or session.status != "suspended":
            return
        ticket = repo.lock_ticket(conn, session.ticket_id)
        if ticket.status == "suspended" and approvals.count_pending(conn, session.id) == 0:
            move_in(conn, ticket.id, "resume")


@hookimpl
def register_approval_hooks(register: Any) -> None:
    register(TicketApprovals())
