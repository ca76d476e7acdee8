"""The ticket actions (seed 002): what an agent does with the ticket it runs.

`add_step` and `update_step` record its steps (seed 002's `steps` rows); `ask_human`
asks a person (ticket and session `suspended`, the question stored as the agent's
message, what the board shows); `complete_ticket` and `fail_ticket` end it. They may be
called only in a turn the ticket scheduler runs in the ticket's own `active` session
(it passes TICKET_ACTIONS to the turn): anywhere else each one refuses with an error
result. Every write joins the step's transaction (`store_only`), so a call and its
effect are stored together or not at all, and a crash before that commit leaves
nothing to undo. `ask_human`, `complete_ticket` and `fail_ticket` end the turn.

Registered through the `register_actions` hook, like every built-in action.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from sqlalchemy.engine import Connection

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.workspace import object_schema
from opencrab.errors import ValidationError
from opencrab.plugins import hookimpl
from opencrab.store.repositories.tickets import TicketSessionRecord
from opencrab.tickets import service
from opencrab.tickets.service import MAX_STEP_TITLE

STEP_STATUSES = ["pending", "running", "completed", "failed"]
MAX_TEXT = 8000  # a question, summary or reason


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "description": description}


class TicketAction(Action):
    """An action on the ticket whose session the turn runs in."""

    store_only = True

    async def ticket_of(self, ctx: ActionContext) -> TicketSessionRecord:
        """The ticket session the turn runs in; ValidationError outside an active one."""
        found = None
        if ctx.session_id is not None:
            found = await ctx.db.run(service.ticket_session, ctx.db, ctx.session_id)
        if found is None or found.agent_id != ctx.agent_id:
            raise ValidationError(f"{self.name} can be called only while running a ticket")
        if found.status != "active":
            raise ValidationError(
                f"this ticket session is {found.status}; {self.name} is not possible now"
            )
        return found

    def move(
        self, ctx: ActionContext, found: TicketSessionRecord, then: Callable[[Connection], object]
    ) -> None:
        """Write `then` in the step's transaction once the session is checked again there
        (a person may have reset the ticket meanwhile: the step then fails, nothing kept)."""

        def change(conn: Connection) -> None:
            session = service.ticket_session_in(conn, found.id)
            if session is None or session.status != "active":
                raise ValidationError(f"ticket session {found.id} is no longer active")
            then(conn)

        ctx.write(change)


class AddStep(TicketAction):
    name = "add_step"
    description = (
        "Add a step to the ticket's plan (after its last one); returns its index. Record "
        "each piece of work as a step and update it with update_step as it goes."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["title"],
        title={"type": "string", "minLength": 1, "maxLength": MAX_STEP_TITLE},
        status={"type": "string", "enum": STEP_STATUSES, "default": "pending"},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await self.ticket_of(ctx)
        title = str(args["title"]).strip()
        if not title:
            return ActionResult.fail("a step title cannot be blank")
        status = args.get("status", "pending")
        ticket = await ctx.db.run(service.get_ticket, ctx.db, found.ticket_id)
        index = ticket.steps[-1].index + 1 if ticket.steps else 0

        def add(conn: Connection) -> None:
            step = service.add_step_in(conn, found.ticket_id, title, status)
            if step.index != index:  # only this run adds steps: it holds the ticket's lease
                raise ValidationError(f"step {index} of ticket {found.ticket_id} was taken")

        self.move(ctx, found, add)
        return ActionResult.ok({"index": index, "title": title, "status": status})


class UpdateStep(TicketAction):
    name = "update_step"
    description = (
        "Change a step of the ticket: its status (pending, running, completed, failed) "
        "and/or its result (a JSON object)."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["index"],
        index={"type": "integer", "minimum": 0},
        status={"type": "string", "enum": STEP_STATUSES},
        result={"type": "object"},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await self.ticket_of(ctx)
        if "status" not in args and "result" not in args:
            return ActionResult.fail("give the step's new status, its result, or both")
        index = int(args["index"])
        ticket = await ctx.db.run(service.get_ticket, ctx.db, found.ticket_id)
        if index not in {step.index for step in ticket.steps}:
            known = ", ".join(str(step.index) for step in ticket.steps) or "none yet"
            return ActionResult.fail(f"the ticket has no step {index} (its steps: {known})")
        status, result = args.get("status"), args.get("result")
        self.move(
            ctx,
            found,
            lambda conn: service.update_step_in(
                conn, found.ticket_id, index, status=status, result=result
            ),
        )
        return ActionResult.ok({"index": index, "status": status, "result": result})


class AskHuman(TicketAction):
    name = "ask_human"
    description = (
        "Ask a person a question and wait: the ticket is suspended until they answer; "
        "their answer comes as the next message."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["question"], question=_text("What you need to know or have decided.")
    )
    ends_turn = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await self.ticket_of(ctx)
        question = str(args["question"]).strip()
        if not question:
            return ActionResult.fail("the question cannot be blank")

        def ask(conn: Connection) -> None:
            service.move_in(conn, found.ticket_id, "suspend")
            service.say_in(conn, ctx.db, found.id, found.agent_id, question)

        self.move(ctx, found, ask)
        return ActionResult.ok({"status": "suspended", "question": question})


class CompleteTicket(TicketAction):
    name = "complete_ticket"
    description = "The ticket is done: say what was achieved (and give a result object)."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["summary"],
        summary=_text("What was done, for the person who filed the ticket."),
        result={"type": "object"},
    )
    ends_turn = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await self.ticket_of(ctx)
        summary = str(args["summary"]).strip()
        if not summary:
            return ActionResult.fail("the summary cannot be blank")
        result = args.get("result")
        text = summary
        if result is not None:
            shown = json.dumps(result, ensure_ascii=False, indent=2)
            text = f"{summary}\n\n```json\n{shown}\n```"

        def complete(conn: Connection) -> None:
            service.say_in(conn, ctx.db, found.id, found.agent_id, text)
            service.move_in(conn, found.ticket_id, "complete")

        self.move(ctx, found, complete)
        return ActionResult.ok({"status": "completed", "summary": summary, "result": result})


class FailTicket(TicketAction):
    name = "fail_ticket"
    description = "The ticket cannot be done: give the reason (kept as its error message)."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["reason"], reason=_text("Why the ticket cannot be done.")
    )
    ends_turn = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await self.ticket_of(ctx)
        reason = str(args["reason"]).strip()
        if not reason:
            return ActionResult.fail("a failed ticket needs a reason")
        self.move(ctx, found, lambda conn: service.move_in(conn, found.ticket_id, "fail", reason))
        return ActionResult.ok({"status": "failed", "reason": reason})


TICKET_ACTIONS = frozenset(
    {"add_step", "update_step", "ask_human", "complete_ticket", "fail_ticket"}
)
"""What the scheduler lets a ticket's turn call besides the agent's own actions."""


@hookimpl
def register_actions(register: Callable[[Action], None]) -> None:
    for action in (AddStep(), UpdateStep(), AskHuman(), CompleteTicket(), FailTicket()):
        register(action)
