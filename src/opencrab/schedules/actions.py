"""`schedule_task`: an agent schedules work for itself (issue 37).

A granted agent calls it with a prompt and one timing — `at` (once), `everySecs`, or
`cron` with its `timezone` — and a run of the schedule is a turn of its own with that
prompt, in the session the call was made in (`sameSession`) or a new one. The same rules
as every other way of creating a schedule apply (opencrab.schedules.service): at most
`[schedules] max_per_agent` schedules, no interval under `[schedules] min_interval_secs`;
a refusal is the action's error, naming the field, for the model to correct.

Registered through the `register_actions` hook, like every built-in action; an agent
may call it once it is granted, like any tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.workspace import object_schema
from opencrab.errors import NotFoundError, ValidationError
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.schedules import service
from opencrab.schedules.spec import MAX_NAME, MAX_PROMPT, next_slot, parse_input


class ScheduleTask(Action):
    name = "schedule_task"
    description = (
        "Schedule work for yourself: `prompt` is given to you as a new turn later — once "
        "`at` a time (ISO 8601 with its offset), every `everySecs` seconds, or on a 5-field "
        "`cron` expression read in `timezone` (an IANA name). With `sameSession` the turn "
        "runs in this conversation, else in a new session each time. Returns the schedule's "
        "id and its next run."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["prompt"],
        prompt={"type": "string", "minLength": 1, "maxLength": MAX_PROMPT},
        name={"type": "string", "minLength": 1, "maxLength": MAX_NAME},
        at={"type": "string", "maxLength": 64, "description": "e.g. 2026-12-24T09:00:00+01:00"},
        everySecs={"type": "integer", "minimum": 1},
        cron={"type": "string", "maxLength": 200, "description": "e.g. '0 9 * * 1-5'"},
        timezone={"type": "string", "maxLength": 64, "description": "e.g. 'Europe/Berlin'"},
        sameSession={"type": "boolean", "default": False},
        catchUp={"type": "string", "enum": ["once", "skip"], "default": "once"},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        action: dict[str, Any] = {"kind": "turn", "prompt": args["prompt"]}
        if args.get("sameSession") and ctx.session_id is not None:
            action["sessionId"] = ctx.session_id
        fields = ("name", "at", "everySecs", "cron", "timezone", "catchUp")
        given = {k: args[k] for k in fields if k in args}
        try:
            spec = parse_input({**given, "action": action})
            row = await run_blocking(
                service.create_schedule,
                ctx.db,
                ctx.settings,
                ctx.agent_id,
                spec,
                created_by="agent",
            )
        except (ValidationError, NotFoundError) as exc:
            return ActionResult.fail(str(exc))
        upcoming = next_slot(row, row.created_at)
        return ActionResult.ok(
            {
                "scheduleId": row.id,
                "name": row.name,
                "nextRun": None if upcoming is None else upcoming.isoformat(),
            }
        )


@hookimpl
def register_actions(register: Callable[[Action], None]) -> None:
    register(ScheduleTask())
