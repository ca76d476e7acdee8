"""What a schedule is: when it runs (its slots) and what a run does, checked on the way in.

A schedule has one of three timings:
- `cron` + `timezone`: a 5-field cron expression read in an IANA time zone, parsed by
  cronsim (DST as cron does it: a time skipped in spring runs at the first minute after
  the gap, a time that occurs twice in autumn runs once);
- `everySecs`: every so many seconds from the moment it was created (its anchor);
- `at`: once, at that time.

and one action:
- `turn`: a turn of the agent with `prompt`, in `sessionId` or a new session per run;
- `ticket`: a new ticket from `template` (`params`, `context`), run by the ticket
  scheduler;
- `post`: a turn with `prompt` in the conversation of a gateway channel (`home`), its
  reply sent to that channel (like a heartbeat home's speech).

`ScheduleInput` is the one input shape of every entry point (REST, CLI, MCP, the
`schedule_task` action); `checked` turns it into a stored row's values or raises a
ValidationError whose message starts with the field at fault (`cron: …`).

Example:
    spec = checked(ScheduleInput(cron="0 9 * * 1-5", timezone="Europe/Berlin",
                                 action={"kind": "turn", "prompt": "Stand-up summary"}),
                   now, min_interval_secs=60)
    next_slot(spec_row, after=now)
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from opencrab.errors import ValidationError

MAX_PROMPT = 8000
MAX_NAME = 200
CRON_SAMPLES = 48  # slots looked at to find a cron expression's shortest gap


class _Input(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class TicketTemplate(_Input):
    """The ticket each run creates (tickets/service.create_ticket's params and context)."""

    params: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)


class HomeChannel(_Input):
    """A gateway's channel a `post` run's reply is sent to (as core.agent.ChannelHome)."""

    gateway: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    channel: str = Field(min_length=1, max_length=500)
    conversation: str | None = Field(default=None, min_length=1, max_length=500)


class ScheduleAction(_Input):
    """What a run does (see the module docstring)."""

    kind: Literal["turn", "ticket", "post"]
    prompt: str | None = Field(default=None, min_length=1, max_length=MAX_PROMPT)
    session_id: str | None = None  # turn: this session; None: a new session per run
    template: TicketTemplate | None = None  # ticket
    home: HomeChannel | None = None  # post


class ScheduleInput(_Input):
    """A new schedule: exactly one of `cron` (with `timezone`), `everySecs` or `at`."""

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    cron: str | None = Field(default=None, max_length=200)
    timezone: str | None = Field(default=None, max_length=64)
    every_secs: int | None = None
    at: datetime | None = None
    action: ScheduleAction
    catch_up: Literal["once", "skip"] = "once"


def parse_input(data: Any) -> ScheduleInput:
    """`data` (a JSON object from a model, MCP or the CLI) as a ScheduleInput, or a
    ValidationError naming the first field at fault."""
    try:
        return ScheduleInput.model_validate(data)
    except PydanticValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "body"
        raise ValidationError(f"{field}: {error['msg']}") from None


class Timing(Protocol):
    """What a schedule's slots depend on (a stored row or checked input)."""

    @property
    def kind(self) -> str: ...
    @property
    def cron(self) -> str | None: ...
    @property
    def timezone(self) -> str | None: ...
    @property
    def every_secs(self) -> int | None: ...
    @property
    def at(self) -> datetime | None: ...
    @property
    def anchor_at(self) -> datetime: ...


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; ValidationError naming `timezone` when there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"timezone: {name!r} is not an IANA time zone (such as 'Europe/Berlin', 'UTC')"
        ) from None


def _cron_after(expr: str, tz: str, after: datetime, *, reverse: bool = False) -> datetime:
    """The first slot of `expr` in `tz` strictly after (or before, `reverse`) `after`, UTC."""
    local = after.astimezone(zone(tz))
    found = next(iter(CronSim(expr, local, reverse=reverse)))
    return found.astimezone(UTC)


def next_slot(timing: Timing, after: datetime) -> datetime | None:
    """The schedule's first slot strictly after `after` (and after its anchor); None when
    it has none left (a one-shot schedule past its time)."""
    anchor = timing.anchor_at
    if timing.kind == "at":
        assert timing.at is not None
        return timing.at if timing.at > after else None
    if timing.kind == "every":
        every = float(timing.every_secs or 0)
        elapsed = (after - anchor).total_seconds()
        steps = max(1, math.floor(elapsed / every) + 1)
        slot = anchor + timedelta(seconds=steps * every)
        while slot <= after:  # float rounding at a boundary
            slot += timedelta(seconds=every)
        return slot
    assert timing.cron is not None
    assert timing.timezone is not None
    return _cron_after(timing.cron, timing.timezone, max(after, anchor))


def latest_slot(timing: Timing, until: datetime) -> datetime | None:
    """The schedule's latest slot at or before `until` (after its anchor); None if none."""
    anchor = timing.anchor_at
    if until <= anchor:
        return None
    if timing.kind == "at":
        assert timing.at is not None
        return timing.at if timing.at <= until else None
    if timing.kind == "every":
        every = float(timing.every_secs or 0)
        steps = math.floor((until - anchor).total_seconds() / every)
        return anchor + timedelta(seconds=steps * every) if steps >= 1 else None
    assert timing.cron is not None
    assert timing.timezone is not None
    found = _cron_after(
        timing.cron, timing.timezone, until + timedelta(microseconds=1), reverse=True
    )
    return found if found > anchor else None


def describe(timing: Timing) -> str:
    """The timing in words, for lists and pages."""
    if timing.kind == "at":
        assert timing.at is not None
        return f"once at {timing.at.isoformat()}"
    if timing.kind == "every":
        return f"every {timing.every_secs} s"
    assert timing.cron is not None
    try:
        words = CronSim(timing.cron, datetime.now(UTC)).explain()
    except Exception:  # explain() covers most expressions, not all
        words = timing.cron
    return f"{words} ({timing.cron}, {timing.timezone})"


class _Checked:
    """A ScheduleInput's timing, checked (a Timing)."""

    def __init__(self, given: ScheduleInput, anchor: datetime) -> None:
        self.cron = given.cron
        self.timezone = given.timezone
        self.every_secs = given.every_secs
        self.at = given.at
        self.anchor_at = anchor
        self.kind = "cron" if given.cron is not None else "every" if given.every_secs else "at"


def checked(
    given: ScheduleInput,
    now: datetime,
    *,
    min_interval_secs: int,
    default_name: str | None = None,
) -> dict[str, Any]:
    """The `schedules` row values of `given` (less agent, id, creator and times), or a
    ValidationError naming the field: not exactly one timing, an invalid cron expression
    or one of other than 5 fields, an unknown time zone, an interval (or a cron
    expression's shortest gap) under `min_interval_secs`, an `at` not in the future, an
    action without what its kind needs."""
    timings = [
        n
        for n, v in (("cron", given.cron), ("everySecs", given.every_secs), ("at", given.at))
        if v is not None
    ]
    if len(timings) != 1:
        named = ", ".join(timings) if timings else "none"
        raise ValidationError(f"timing: give exactly one of cron, everySecs or at (given: {named})")
    if given.cron is not None:
        _check_cron(given.cron, given.timezone, now, min_interval_secs)
    elif given.timezone is not None:
        raise ValidationError("timezone: a time zone goes with a cron expression only")
    if given.every_secs is not None and given.every_secs < min_interval_secs:
        raise ValidationError(
            f"everySecs: {given.every_secs} is under the minimum interval of "
            f"{min_interval_secs} s ([schedules] min_interval_secs)"
        )
    if given.at is not None:
        if given.at.tzinfo is None:
            raise ValidationError("at: give the time with its offset (2026-12-24T09:00:00+01:00)")
        if given.at <= now:
            raise ValidationError(f"at: {given.at.isoformat()} is not in the future")
    action = _checked_action(given.action)
    timing = _Checked(given, now)
    return {
        "name": given.name or default_name or _default_name(given),
        "kind": timing.kind,
        "cron": " ".join(given.cron.split()) if given.cron else None,
        "timezone": given.timezone,
        "every_secs": given.every_secs,
        "at": given.at.astimezone(UTC) if given.at else None,
        "anchor_at": now,
        "action_json": action,
        "catch_up": given.catch_up,
    }


def _check_cron(expr: str, tz: str | None, now: datetime, min_interval_secs: int) -> None:
    fields = expr.split()
    if len(fields) != 5:
        raise ValidationError(
            f"cron: {expr!r} has {len(fields)} fields; give 5 (minute hour day month weekday)"
        )
    if tz is None:
        raise ValidationError("timezone: a cron expression needs its IANA time zone ('UTC' too)")
    local = now.astimezone(zone(tz))
    try:
        slots = CronSim(" ".join(fields), local)
        times = [next(slots) for _ in range(CRON_SAMPLES)]
    except (CronSimError, StopIteration) as exc:
        raise ValidationError(f"cron: {expr!r} is not a valid cron expression ({exc})") from None
    utc = [t.astimezone(UTC) for t in times]  # local times subtract naively (DST)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(utc)]
    if gaps and min(gaps) < min_interval_secs:
        raise ValidationError(
            f"cron: {expr!r} runs every {min(gaps):.0f} s at times, under the minimum interval "
            f"of {min_interval_secs} s ([schedules] min_interval_secs)"
        )


def _checked_action(action: ScheduleAction) -> dict[str, Any]:
    if action.kind in ("turn", "post") and not (action.prompt or "").strip():
        raise ValidationError(f"action.prompt: a {action.kind} action needs a prompt")
    if action.session_id is not None:
        if action.kind != "turn":
            raise ValidationError("action.sessionId: only a turn action runs in a given session")
        try:
            action.session_id = str(UUID(action.session_id))
        except ValueError:
            raise ValidationError(
                f"action.sessionId: {action.session_id!r} is not a UUID"
            ) from None
    if action.kind == "ticket" and action.template is None:
        raise ValidationError("action.template: a ticket action needs a template (params, context)")
    if action.kind == "post" and action.home is None:
        raise ValidationError("action.home: a post action needs a home (gateway, channel)")
    return action.model_dump(by_alias=True, exclude_none=True)


def _default_name(given: ScheduleInput) -> str:
    what = given.action.prompt or given.action.kind
    what = " ".join(what.split())
    return what if len(what) <= 60 else what[:59] + "…"
