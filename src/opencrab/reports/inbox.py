"""The inbox (issue 37, section 2): everything across the fleet that waits for a person.

The inbox is a registry of item sources (`SOURCES`): each is a query that returns the
items of one kind waiting now, and the inbox is their union, newest first. Built in:

- `approval`: a tool call held for a person (tickets, chats, MCP tools alike), decided
  with `POST /api/approvals/{subjectId}/approve|deny`;
- `ticket_question`: a suspended ticket (its agent asked with `ask_human`, or a limit
  paused it), answered with `POST /api/sessions/{subjectId}/messages` (the ticket's
  current session: the ticket runs on); one suspended on a held call is that call's
  `approval` item only;
- `agent_mode_question`: a sub-agent of agent mode waiting for input (WaitingInput),
  answered with `POST /api/agent-mode/sessions/{sessionId}/tasks/{taskId}/answer`;
- `budget_alert`: 80 % or 100 % of a cap reached this period (the highest threshold of
  each cap and period; a ticket's within a week), and
- `spend_alarm`: a slow-burn alarm of today (core/spend_alarms.py); these two are
  dismissed with `POST /api/inbox/{id}/dismiss`;
- `schedule_failure`: a schedule's run that failed, or was abandoned by a process that
  died (opencrab/schedules), until a person acknowledges it: `POST /api/inbox/{id}/dismiss`
  or `POST /api/schedule-runs/{subjectId}/acknowledge`.

Another kind plugs in as one more source: `register_source(kind, fn)`, `fn(runtime,
query)` returning its `InboxItem`s (sync; it is run off the event loop).
An item's `id` is `<kind>:<subject>`, stable for as long as it waits, which is what the
notifier (opencrab/inbox/notifier.py) sends once.

Example:
    view = await inbox_view(runtime, agent="aki", kinds=["approval"], limit=50)
    view.items[0].subject_id   # the approval to decide
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import Field

from opencrab.agentmode.model import SessionStatus, SubAgentStatus
from opencrab.agentmode.runstate import RunFiles
from opencrab.agentmode.service import AgentModeService
from opencrab.core.budgets import Budgets, alert_text, day_start, month_start, ticket_of
from opencrab.core.runtime import Runtime
from opencrab.core.spend_alarms import Alarm, slow_burn
from opencrab.errors import NotFoundError, ValidationError
from opencrab.offload import run_blocking
from opencrab.reports.model import ApiModel
from opencrab.schedules import service as schedules
from opencrab.store.repositories import inbox as repo
from opencrab.store.repositories.budgets import FLEET, AlertRow
from opencrab.store.repositories.inbox import ItemRow, Noticed
from opencrab.store.repositories.sessions import latest_spoken
from opencrab.tickets import service as tickets

MAX_SUMMARY = 300
"""An item's summary is cut to this many characters (its `detail` has more)."""
MAX_DETAIL = 4000
MAX_ITEMS = 1000
"""The most items one source gives (newest first)."""
TICKET_ALERT_DAYS = 7
DISMISSIBLE = ("budget_alert", "spend_alarm", "schedule_failure")


class InboxItem(ApiModel):
    id: str = Field(description="`<kind>:<subject>`: stable while the item waits.")
    kind: str = Field(
        description="approval, ticket_question, agent_mode_question, budget_alert, "
        "spend_alarm, schedule_failure"
    )
    agent_id: str | None = Field(description="The agent it concerns (none: the fleet).")
    agent: str | None = Field(description="That agent's name.")
    created_at: datetime
    summary: str = Field(description="One line: what waits (at most 300 characters).")
    subject_id: str = Field(
        description="What to answer: the approval's id (approval), the ticket's current "
        "session (ticket_question), the task's id (agent_mode_question), the item's id "
        "(budget_alert, spend_alarm: dismiss it), the run's id (schedule_failure)."
    )
    link: str = Field(description="The dashboard page where it lives.")
    detail: str | None = Field(
        default=None, description="More of it: a held call's arguments, the whole question."
    )
    session_id: str | None = None
    ticket_id: str | None = None
    task_id: str | None = None
    tool_name: str | None = None


class Delivery(ApiModel):
    item_id: str
    kind: str
    status: str = Field(description="sent or failed")
    notified_at: datetime | None
    error: str | None = Field(description="Why it failed, per outlet (never a URL or secret).")


class NotifySetting(ApiModel):
    enabled: bool
    outlets: list[str] = Field(description="webhook, and the gateway of [budgets] alert_outlet")
    last_failure: Delivery | None


class InboxView(ApiModel):
    items: list[InboxItem]
    count: int = Field(description="Every item waiting (matching the filters), listed or not.")
    counts: dict[str, int] = Field(description="The count by kind.")
    notifications: NotifySetting


@dataclass(frozen=True)
class InboxQuery:
    """What a source is asked for: one agent's items (None: all) and how many at most."""

    agent_id: str | None = None
    limit: int = MAX_ITEMS


InboxSource = Callable[[Runtime, InboxQuery], list[InboxItem]]
SOURCES: dict[str, InboxSource] = {}
"""kind -> the source of that kind's items, in the order they were registered."""


def register_source(kind: str, source: InboxSource) -> None:
    """Add (or replace) the source of `kind`'s items."""
    SOURCES[kind] = source


def _cut(text: str, limit: int = MAX_SUMMARY) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _names(runtime: Runtime) -> dict[str, str]:
    return {agent_id: name for agent_id, (name, _) in runtime.agents.names().items()}


# ------------------------------------------------------------ the built-in sources
def approval_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Tool calls held for a person."""
    held = runtime.approvals.list_approvals(status="pending", limit=query.limit)
    names = _names(runtime)
    items = []
    for record in held:
        if query.agent_id is not None and record.agent_id != query.agent_id:
            continue
        ticket = tickets.ticket_session(runtime.db, record.session_id)
        arguments = json.dumps(record.arguments, ensure_ascii=False, default=str)
        link = (
            f"/tickets/{ticket.ticket_id}"
            if ticket is not None
            else f"/sessions/{record.session_id}"
        )
        items.append(
            InboxItem(
                id=f"approval:{record.id}",
                kind="approval",
                agent_id=record.agent_id,
                agent=names.get(record.agent_id),
                created_at=record.created_at,
                summary=_cut(f"Wants to run {record.tool_name} {arguments}"),
                subject_id=record.id,
                link=link,
                detail=json.dumps(record.arguments, ensure_ascii=False, indent=2, default=str)[
                    :MAX_DETAIL
                ],
                session_id=record.session_id,
                ticket_id=None if ticket is None else ticket.ticket_id,
                tool_name=record.tool_name,
            )
        )
    return items


def ticket_question_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Suspended tickets: what their agent asked (its last words in the session)."""
    found = tickets.list_tickets(
        runtime.db, status="suspended", agent_id=query.agent_id, limit=query.limit
    )
    items = []
    for summary in found:
        ticket = tickets.get_ticket(runtime.db, summary.id)
        session_id = ticket.current_session_id
        if session_id is None:
            continue
        if runtime.approvals.list_approvals(session_id=str(session_id), status="pending", limit=1):
            continue  # it waits for a held call's decision: that item says so
        said = latest_spoken(runtime.db, str(session_id), after=0, limit=20)
        question = next((s.content for s in said if s.role == "assistant"), None)
        text = question or "Suspended without a question (a limit was reached): answer to resume"
        items.append(
            InboxItem(
                id=f"ticket_question:{ticket.id}",
                kind="ticket_question",
                agent_id=ticket.agent_id,
                agent=summary.agent_name,
                created_at=summary.updated_at,
                summary=_cut(text),
                subject_id=str(session_id),
                link=f"/tickets/{ticket.id}",
                detail=None if question is None else question[:MAX_DETAIL],
                session_id=str(session_id),
                ticket_id=ticket.id,
            )
        )
    return items


def agent_mode_question_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Agent-mode sub-agents waiting for input (they belong to no agent of the fleet)."""
    if query.agent_id is not None:
        return []
    service = AgentModeService.open(runtime.settings, runtime.db)
    runs = RunFiles(runtime.settings.data_dir / "agent-mode")
    items = []
    for row in service.list(status=SessionStatus.ACTIVE, limit=query.limit):
        if not row.task_counts.get("running"):
            continue
        state = runs.load(row.id)
        if state is None or not state.questions:
            continue
        session = service.get(row.id)
        for task in session.tasks:
            question = state.questions.get(task.id)
            agent = task.sub_agent
            if (
                question is None
                or agent is None
                or agent.status is not (SubAgentStatus.WAITING_INPUT)
            ):
                continue
            items.append(
                InboxItem(
                    id=f"agent_mode_question:{row.id}/{task.id}",
                    kind="agent_mode_question",
                    agent_id=None,
                    agent=None,
                    created_at=session.updated_at,
                    summary=_cut(f"{task.name}: {question}"),
                    subject_id=task.id,
                    link=f"/agent-mode/{row.id}",
                    detail=question[:MAX_DETAIL],
                    session_id=row.id,
                    task_id=task.id,
                )
            )
    return items


def alert_key(row: AlertRow) -> str:
    """The inbox id of a budget alert."""
    return f"budget_alert:{row.scope}:{row.cap}:{row.period}:{row.threshold}"


def current_alerts(runtime: Runtime, now: datetime | None = None) -> list[AlertRow]:
    """This period's alerts (a ticket's: of the last week), the highest threshold of each
    cap and period, newest first."""
    now = now or datetime.now(UTC)
    since = month_start(now) - timedelta(days=TICKET_ALERT_DAYS)
    rows = Budgets(runtime.db, runtime.settings).alerts(since, 2000)
    today, month = now.strftime("%Y-%m-%d"), now.strftime("%Y-%m")
    week_ago = day_start(now) - timedelta(days=TICKET_ALERT_DAYS)
    top: dict[tuple[str, str, str], AlertRow] = {}
    for row in rows:
        current = (
            (row.cap == "daily" and row.period == today)
            or (row.cap == "monthly" and row.period == month)
            or (ticket_of(row.scope) is not None and (row.created_at or now) >= week_ago)
        )
        key = (row.scope, row.cap, row.period)
        if current and (key not in top or top[key].threshold < row.threshold):
            top[key] = row
    return sorted(top.values(), key=lambda r: r.created_at or now, reverse=True)


def budget_alert_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Budget alerts of this period nobody dismissed."""
    now = datetime.now(UTC)
    names = _names(runtime)
    with runtime.db.read() as conn:
        gone = repo.dismissed(conn, ["budget_alert"], month_start(now) - timedelta(days=40))
    items = []
    for row in current_alerts(runtime, now):
        key = alert_key(row)
        agent_id = None if row.scope == FLEET or ticket_of(row.scope) else row.scope
        if key in gone or (query.agent_id is not None and agent_id != query.agent_id):
            continue
        ticket = ticket_of(row.scope)
        items.append(
            InboxItem(
                id=key,
                kind="budget_alert",
                agent_id=agent_id,
                agent=None if agent_id is None else names.get(agent_id),
                created_at=row.created_at or now,
                summary=_cut(alert_text(row, names)),
                subject_id=key,
                link="/budgets" if ticket is None else f"/tickets/{ticket}",
                ticket_id=ticket,
            )
        )
    return items[: query.limit]


def alarm_key(alarm: Alarm) -> str:
    """The inbox id of a spend alarm."""
    return f"spend_alarm:{alarm.key}"


def spend_alarm_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Today's slow-burn alarms (this month's forecast alarms) nobody dismissed; an
    alarm's time is when the inbox first noticed it."""
    now = datetime.now(UTC)
    agents = runtime.agents.list()
    if query.agent_id is not None:
        agents = [a for a in agents if a.id == query.agent_id]
    alarms = [
        a
        for a in slow_burn(runtime.db, runtime.settings, agents, now).alarms
        if query.agent_id is None or a.scope == query.agent_id
    ]
    keys = [alarm_key(a) for a in alarms]
    with runtime.db.read() as conn:
        gone = repo.dismissed(conn, ["spend_alarm"], month_start(now) - timedelta(days=40))
        seen = {r.key: r.first_seen_at for r in repo.rows(conn, keys)}
    return [
        InboxItem(
            id=key,
            kind="spend_alarm",
            agent_id=alarm.agent_id,
            agent=None if alarm.agent_id is None else alarm.name,
            created_at=seen.get(key, now),
            summary=_cut(f"Spend alarm ({alarm.rule}) for {_whose(alarm)}: {alarm.detail}"),
            subject_id=key,
            link="/budgets",
        )
        for alarm, key in zip(alarms, keys, strict=True)
        if key not in gone
    ]


def _whose(alarm: Alarm) -> str:
    return "the fleet" if alarm.agent_id is None else f"agent {alarm.name}"


def schedule_failure_items(runtime: Runtime, query: InboxQuery) -> list[InboxItem]:
    """Schedule runs that failed or were abandoned, not yet acknowledged."""
    names = _names(runtime)
    items = []
    for run in schedules.failed_runs(runtime.db, agent_id=query.agent_id, limit=query.limit):
        what = "was abandoned (its process died)" if run.status == "abandoned" else "failed"
        slot = run.slot.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        items.append(
            InboxItem(
                id=f"schedule_failure:{run.id}",
                kind="schedule_failure",
                agent_id=run.agent_id,
                agent=names.get(run.agent_id),
                created_at=run.ended_at or run.started_at,
                summary=_cut(f"schedule {run.schedule_name!r}: the run of {slot} {what}"),
                subject_id=run.id,
                link="/schedules",
                detail=None if run.detail is None else run.detail[:MAX_DETAIL],
                session_id=run.session_id,
                ticket_id=run.ticket_id,
            )
        )
    return items


register_source("approval", approval_items)
register_source("ticket_question", ticket_question_items)
register_source("agent_mode_question", agent_mode_question_items)
register_source("budget_alert", budget_alert_items)
register_source("spend_alarm", spend_alarm_items)
register_source("schedule_failure", schedule_failure_items)


# ------------------------------------------------------------ the inbox
def check_kinds(kinds: Iterable[str] | None) -> list[str]:
    """The kinds asked for (all when none); ValidationError naming an unknown one."""
    wanted = list(kinds or [])
    unknown = [k for k in wanted if k not in SOURCES]
    if unknown:
        raise ValidationError(
            f"kind: no inbox item kind {unknown[0]!r}; one of {', '.join(SOURCES)}"
        )
    return wanted or list(SOURCES)


def collect(runtime: Runtime, agent_id: str | None, kinds: Sequence[str]) -> list[InboxItem]:
    """Every waiting item of these kinds (of one agent), newest first (blocking)."""
    query = InboxQuery(agent_id=agent_id)
    items = [item for kind in kinds for item in SOURCES[kind](runtime, query)]
    return sorted(items, key=lambda i: (i.created_at, i.id), reverse=True)


def _delivery(row: ItemRow) -> Delivery:
    return Delivery(
        item_id=row.key,
        kind=row.kind,
        status=row.notify_status,
        notified_at=row.notified_at,
        error=row.notify_error,
    )


def outlets_of(runtime: Runtime) -> list[str]:
    """Where new items are sent: `webhook` and the alert outlet's gateway, if set."""
    section = runtime.settings.inbox
    if not section.notify:
        return []
    found = ["webhook"] if section.webhook_url else []
    where = runtime.settings.budgets.alert_outlet
    return found + ([where.gateway] if where is not None else [])


def notify_setting(runtime: Runtime) -> NotifySetting:
    """Where notifications go and the last one that failed (blocking)."""
    with runtime.db.read() as conn:
        failed = repo.deliveries(conn, failed_only=True, limit=1)
    outlets = outlets_of(runtime)
    return NotifySetting(
        enabled=bool(outlets),
        outlets=outlets,
        last_failure=_delivery(failed[0]) if failed else None,
    )


def _agent_id(runtime: Runtime, agent: str | None) -> str | None:
    return None if not agent else runtime.agents.get(agent).id


async def inbox_view(
    runtime: Runtime, *, agent: str | None, kinds: Iterable[str] | None, limit: int
) -> InboxView:
    """The items `GET /api/inbox` answers and the Inbox page shows: newest first, of one
    agent (id or name; NotFoundError when there is none) and of these kinds."""
    wanted = check_kinds(kinds)

    def read() -> InboxView:
        items = collect(runtime, _agent_id(runtime, agent), wanted)
        counts = dict.fromkeys(wanted, 0)
        for item in items:
            counts[item.kind] += 1
        return InboxView(
            items=items[:limit],
            count=len(items),
            counts=counts,
            notifications=notify_setting(runtime),
        )

    return await run_blocking(read)


async def inbox_count(runtime: Runtime) -> int:
    """How many items wait, over the whole fleet (the top bar's count)."""
    return len(await run_blocking(collect, runtime, None, list(SOURCES)))


async def dismiss(runtime: Runtime, item_id: str, by: str) -> InboxItem:
    """Dismiss a waiting budget alert or spend alarm; ValidationError for another kind
    (answer or decide it instead), NotFoundError when nothing waits under that id (one
    dismissed already included)."""
    kind = item_id.partition(":")[0]
    if kind not in DISMISSIBLE:
        raise ValidationError(
            f"id: only a budget alert, a spend alarm or a failed schedule run is "
            f"dismissed; {item_id!r} is "
            "answered or decided where it lives (its subjectId)"
        )

    def run() -> InboxItem:
        waiting = next((i for i in SOURCES[kind](runtime, InboxQuery()) if i.id == item_id), None)
        if waiting is None:
            raise NotFoundError(f"no {kind.replace('_', ' ')} {item_id!r} waits in the inbox")
        if kind == "schedule_failure":  # acknowledged where the schedules keep it
            schedules.acknowledge_run(runtime.db, waiting.subject_id)
            return waiting
        noticed = Noticed(item_id, kind, waiting.agent_id, waiting.summary)
        with runtime.db.write() as conn:
            repo.dismiss(conn, noticed, by, datetime.now(UTC))
        return waiting

    return await run_blocking(run)


async def deliveries(runtime: Runtime, *, failed_only: bool, limit: int) -> list[Delivery]:
    """Notifications sent or failed, the latest first."""

    def read() -> list[Delivery]:
        with runtime.db.read() as conn:
            return [
                _delivery(r) for r in repo.deliveries(conn, failed_only=failed_only, limit=limit)
            ]

    return await run_blocking(read)


def as_noticed(items: Iterable[InboxItem]) -> list[Noticed]:
    """Items as the notifier records them."""
    return [Noticed(i.id, i.kind, i.agent_id, i.summary) for i in items]
