"""The ticket state machine of seed 002, with what each move does to the ticket's session.

    pending ──start──▶ running ──suspend──▶ suspended
                        │  ▲                   │
                        │  └──────resume───────┘
                        ├──complete──▶ completed
                        └──fail──────▶ failed      (also from suspended)
    any status ──reset──▶ pending

`start` opens a new session (`active`); `suspend`, `resume`, `complete` and `fail` set the
current session to `suspended`, `active`, `completed` and `failed` (GAP-002); `reset`
archives the current session as `completed` (one that already ended, a failed run's,
stays as it ended) and keeps the steps (GAP-001), so the next `start` opens a new
session. A move from a status that does not allow it is a TicketStateError (400) naming
both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from opencrab.errors import TicketStateError

TicketStatus = Literal["pending", "running", "suspended", "completed", "failed"]
SessionStatus = Literal["active", "suspended", "completed", "failed"]
StepStatus = Literal["pending", "running", "completed", "failed"]
MoveName = Literal["start", "suspend", "resume", "complete", "fail", "reset"]

TICKET_STATUSES: tuple[TicketStatus, ...] = get_args(TicketStatus)


@dataclass(frozen=True)
class Move:
    """A transition: the statuses it leaves, the one it reaches, and its session's status
    afterwards (for `start`, the new session's)."""

    sources: tuple[TicketStatus, ...]
    target: TicketStatus
    session: SessionStatus


MOVES: dict[MoveName, Move] = {
    "start": Move(("pending",), "running", "active"),
    "suspend": Move(("running",), "suspended", "suspended"),
    "resume": Move(("suspended",), "running", "active"),
    "complete": Move(("running",), "completed", "completed"),
    "fail": Move(("running", "suspended"), "failed", "failed"),
    "reset": Move(TICKET_STATUSES, "pending", "completed"),
}


def check_move(ticket_id: str, status: str, move: MoveName) -> Move:
    """The move, if a ticket in `status` may make it; else TicketStateError naming why."""
    rule = MOVES[move]
    if status not in rule.sources:
        allowed = " or ".join(rule.sources)
        raise TicketStateError(
            f"ticket {ticket_id} is {status}; only a {allowed} ticket can {move}"
        )
    return rule
