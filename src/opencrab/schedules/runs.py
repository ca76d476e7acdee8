"""What a schedule's run does (schedules/spec.py, "action"), carried out once claimed.

- `turn`: a turn of the agent through the turn service with the prompt, in the action's
  session (waiting for a turn already going on there) or a new chat session per run;
- `ticket`: a `pending` ticket from the template, which the ticket scheduler runs;
- `post`: a turn in the conversation of the gateway channel, its reply sent there through
  the gateway running in this process (a process without that gateway fails the run,
  saying so).

Each returns how the run ended (schedules' RunEnd): succeeded or failed with the reason,
what the turn's model calls cost, and the session or ticket it produced.

Example:
    end = await carry_out(runtime, schedule_row)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from opencrab.core.agent import ChannelHome
from opencrab.core.runtime import Runtime
from opencrab.core.steps import LlmReplied, TurnResult
from opencrab.messages import (
    IncomingMessage,
    InternalSource,
    MessageContent,
    OutgoingMessage,
    Sender,
)
from opencrab.offload import run_blocking
from opencrab.store.repositories.schedules import RunEnd, ScheduleRow
from opencrab.tickets import service as tickets

MAX_DETAIL = 2000  # characters of a reply or an error kept on the run


def _shortened(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


async def carry_out(runtime: Runtime, schedule: ScheduleRow) -> RunEnd:
    """Carry out the schedule's action (one claimed run); how it ended."""
    action = schedule.action
    kind = action.get("kind")
    if kind == "ticket":
        return await _ticket(runtime, schedule, action)
    if kind == "post":
        return await _post(runtime, schedule, action)
    session_id = action.get("sessionId") or str(uuid4())
    result, cost = await _turn(runtime, schedule, str(action["prompt"]), session_id)
    return _turn_end(result, cost)


async def _turn(
    runtime: Runtime, schedule: ScheduleRow, prompt: str, session_id: str
) -> tuple[TurnResult, float]:
    agent = await run_blocking(runtime.agents.get, schedule.agent_id)
    message = IncomingMessage.text(
        prompt,
        source=InternalSource(origin="schedule"),
        sender=Sender(id=f"schedule:{schedule.id}", name=schedule.name[:100]),
    )
    cost = 0.0
    result: TurnResult | None = None
    async for step in runtime.turns.steps(
        agent, message, session_id=session_id, task_type="schedule", wait_busy=True
    ):
        if isinstance(step, LlmReplied):
            cost += step.cost_usd or 0.0
        elif isinstance(step, TurnResult):
            result = step
    assert result is not None
    return result, cost


def _turn_end(result: TurnResult, cost: float, **more: Any) -> RunEnd:
    now = datetime.now(UTC)
    if result.error is not None:
        why = f"{result.error.error}: {result.error.message}"
        return RunEnd("failed", now, cost, result.session_id, detail=_shortened(why))
    return RunEnd(
        "succeeded", now, cost, result.session_id, detail=_shortened(result.reply), **more
    )


async def _ticket(runtime: Runtime, schedule: ScheduleRow, action: dict[str, Any]) -> RunEnd:
    template = action.get("template") or {}
    ticket = await run_blocking(
        tickets.create_ticket,
        runtime.db,
        schedule.agent_id,
        params=template.get("params") or {},
        context=template.get("context") or {},
    )
    return RunEnd(
        "succeeded", datetime.now(UTC), ticket_id=ticket.id, detail=f"ticket {ticket.id} created"
    )


async def _post(runtime: Runtime, schedule: ScheduleRow, action: dict[str, Any]) -> RunEnd:
    given = action["home"]
    home = ChannelHome(
        gateway=given["gateway"],
        channel_id=given["channel"],
        conversation=given.get("conversation"),
    )
    outlet = runtime.outlets.get(home.gateway)
    now = datetime.now(UTC)
    if outlet is None:
        return RunEnd(
            "failed", now, detail=f"the {home.gateway} gateway is not running in this process"
        )
    session_id = home.session_for(schedule.agent_id)
    result, cost = await _turn(runtime, schedule, str(action["prompt"]), session_id)
    if result.error is not None or not result.reply:
        end = _turn_end(result, cost)
        if end.status == "succeeded":  # no reply: nothing to post
            return RunEnd("failed", end.ended_at, cost, result.session_id, detail="no reply")
        return end
    await outlet.send(
        OutgoingMessage(content=MessageContent(text=result.reply), target=home.outlet().target())
    )
    return _turn_end(result, cost)
