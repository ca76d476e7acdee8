"""Budgets and alerts (issue 21 §3): caps checked before every LLM call, spend and its
forecast, alerts at 80 % and 100 % of a cap.

Caps, each held before every LLM call by a reservation of the call's estimated cost
(core/reservations.py, the router's guard: atomic in the store, so they hold under
concurrency and across processes); `Budgets.check` tells whether one is spent already:
- an agent's daily and monthly budget (`llm.dailyBudgetUsd`, `llm.monthlyBudgetUsd`);
- the fleet's daily and monthly cap (`PUT /api/budgets` once set, else `[budgets]`);
- a ticket's cost limit for a stretch of running (`maxCostUsd`, tickets/scheduler.py),
  given to the turn as a `CostCap`.
A day is a UTC day, a month a UTC calendar month. Reaching 80 % or 100 % of an agent's
or the fleet's cap records an alert once per cap, period and threshold (budget_alerts);
of a ticket's cap, once per ticket (scope `ticket:<id>`, cap and period `ticket`).
`notify` also delivers new alerts in the background: POSTed as JSON to `[budgets]
webhook_url`, and written to the outlet `[budgets] alert_outlet` (a gateway and a
channel) through that gateway, when it runs in this process. `Standing` tells which
agents a cap stops now (the heartbeat's check before it acts, the home cards' "over
budget").

Example:
    budgets = Budgets(db, settings)
    await enforce(db, settings, agent, None)  # BudgetExceeded when a cap is spent;
                                              # new alerts POSTed in the background
    budgets.overview()                     # caps, spend, forecast, idle cost, alerts
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from opencrab.config import Settings
from opencrab.errors import BudgetExceeded
from opencrab.messages import MessageContent, MessageOutlet, OutgoingMessage, Outlet
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.repositories import budgets as repo
from opencrab.store.repositories.budgets import FLEET, AlertRow

if TYPE_CHECKING:
    from opencrab.core.llm_config import AgentLlmConfig

log = logging.getLogger(__name__)

THRESHOLDS = (80, 100)
"""Percent of a cap at which an alert is recorded."""
HEARTBEAT_TASK = "heartbeat"
"""The task type of the heartbeat's own calls (its turn at home): the idle-cost meter."""
ALERT_LIMIT = 200


class BudgetedAgent(Protocol):
    """What a budget check reads of an agent: core.agent.Agent is one (a protocol, so
    that this module, which core/agent.py imports, does not import it back)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def llm_config(self) -> AgentLlmConfig: ...


@dataclass(frozen=True)
class CostCap:
    """A ticket's cost limit for a stretch of running, and what the stretch spent so far
    (the engine adds its turn's calls before each check)."""

    limit_usd: float
    spent_usd: float = 0.0
    label: str = "maxCostUsd"
    ticket_id: str | None = None  # its alerts are recorded once per ticket


@dataclass(frozen=True)
class Verdict:
    """A budget check: the alerts it newly recorded, and why the call is refused (None: go)."""

    alerts: list[AlertRow]
    refusal: str | None


@dataclass(frozen=True)
class Spend:
    """Caps, spend and forecast of one agent or the fleet, for today and this month."""

    daily_cap_usd: float | None
    monthly_cap_usd: float | None
    today_usd: float
    month_usd: float
    forecast_today_usd: float
    forecast_month_usd: float


@dataclass(frozen=True)
class AgentSpend:
    """An agent's spend figures and its idle cost (what its heartbeat turns cost)."""

    agent_id: str
    name: str
    spend: Spend
    heartbeat_today_usd: float
    heartbeat_month_usd: float


@dataclass(frozen=True)
class Overview:
    """The fleet's and every agent's figures, and the latest alerts."""

    fleet: Spend
    agents: list[AgentSpend]
    alerts: list[AlertRow] = field(default_factory=list)


def day_start(now: datetime) -> datetime:
    """00:00 UTC of `now`'s day."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    """00:00 UTC of the first day of `now`'s month."""
    return day_start(now).replace(day=1)


def next_month(now: datetime) -> datetime:
    """00:00 UTC of the first day of the month after `now`'s."""
    first = month_start(now)
    return (first + timedelta(days=32)).replace(day=1)


def forecast(spent: float, start: datetime, end: datetime, now: datetime) -> float:
    """The period's spend at its end if the rate so far goes on: linear extrapolation.

    Method: `spent / elapsed fraction`, the fraction being (now - start) / (end - start),
    but at least 1/24 of the period (the first hour of a day, the first ~31 hours of a
    month) so a first call right after the period began is not multiplied without bound.
    At or after the end it is the spend itself; never below the spend so far.
    """
    total = (end - start).total_seconds()
    fraction = min(1.0, max((now - start).total_seconds() / total, 1 / 24))
    return max(spent, spent / fraction)


TICKET = "ticket"
"""The cap and period of a ticket's alerts (scope `ticket:<id>`): once per ticket."""


def ticket_scope(ticket_id: str) -> str:
    """The alert scope of a ticket's cost cap."""
    return f"{TICKET}:{ticket_id}"


def ticket_of(scope: str) -> str | None:
    """The ticket id of a ticket alert's scope, else None."""
    prefix = f"{TICKET}:"
    return scope[len(prefix) :] if scope.startswith(prefix) else None


def spent_cap(
    caps: tuple[float | None, float | None],
    used: tuple[float, float],
    fleet_caps: tuple[float | None, float | None],
    fleet_used: tuple[float, float],
) -> str | None:
    """The first spent cap of an agent (`caps`, `used`: daily, monthly) or of the fleet,
    named ("daily budget", "monthly budget", "fleet daily cap", "fleet monthly cap"); None
    when none is. A cap is spent once the spend reached it, as `Budgets.check` counts."""
    named = (
        ("daily budget", caps[0], used[0]),
        ("monthly budget", caps[1], used[1]),
        ("fleet daily cap", fleet_caps[0], fleet_used[0]),
        ("fleet monthly cap", fleet_caps[1], fleet_used[1]),
    )
    return next((name for name, cap, spent in named if cap is not None and spent >= cap), None)


@dataclass(frozen=True)
class Standing:
    """Every agent's and the fleet's spend today and this month, and the fleet's caps,
    read at once: which agents a cap stops now."""

    by_agent: dict[str, tuple[float, float]]
    fleet: tuple[float, float]
    fleet_caps: tuple[float | None, float | None]

    def spent(self, agent_id: str) -> tuple[float, float]:
        """The agent's (today, this month) USD."""
        return self.by_agent.get(agent_id, (0.0, 0.0))

    def stopped(self, agent_id: str, caps: tuple[float | None, float | None]) -> str | None:
        """The spent cap (see `spent_cap`) that stops the agent, with its `caps`
        (daily, monthly), or None."""
        return spent_cap(caps, self.spent(agent_id), self.fleet_caps, self.fleet)


def _period(cap: str, now: datetime) -> str:
    return now.strftime("%Y-%m-%d") if cap == "daily" else now.strftime("%Y-%m")


def thresholds_reached(
    scope: str, caps: tuple[float | None, float | None], spent: tuple[float, float], now: datetime
) -> list[AlertRow]:
    """The thresholds of these caps that the spend has reached."""
    rows = []
    for cap, limit, used in zip(("daily", "monthly"), caps, spent, strict=True):
        if limit is None:
            continue
        for threshold in THRESHOLDS:
            if used >= limit * threshold / 100:
                rows.append(AlertRow(scope, cap, _period(cap, now), threshold, limit, used))
    return rows


class Budgets:
    """Caps, spend, forecasts and alerts over the store (see the module docstring)."""

    def __init__(self, db: Database, settings: Settings | None) -> None:
        self.db = db
        self.settings = settings  # None: no `[budgets]` (fleet caps only when stored)

    # ------------------------------------------------------------ caps
    def fleet_caps(self) -> tuple[float | None, float | None]:
        """The fleet's (daily, monthly) caps: stored through the API, else `[budgets]`."""
        with self.db.read() as conn:
            stored = repo.fleet_caps(conn)
        return fleet_caps_of(stored, self.settings)

    def fleet_caps_stored(self) -> bool:
        """True once the fleet's caps were set through the API (they override `[budgets]`)."""
        with self.db.read() as conn:
            return repo.fleet_caps(conn) is not None

    def set_fleet_caps(self, daily_usd: float | None, monthly_usd: float | None) -> None:
        """Store the fleet's caps (None: no cap); they apply from the next call."""
        with self.db.write() as conn:
            repo.save_fleet_caps(conn, daily_usd, monthly_usd, datetime.now(UTC))

    def standing(self, now: datetime | None = None) -> Standing:
        """Every agent's and the fleet's spend today and this month, and the fleet's caps."""
        now = now or datetime.now(UTC)
        caps = self.fleet_caps()
        day, month = day_start(now), month_start(now)
        with self.db.read() as conn:  # one snapshot
            by_agent = repo.spend_by_agent(conn, day, month)
            fleet = repo.spend(conn, None, day, month)
        return Standing(by_agent, fleet, caps)

    # ------------------------------------------------------------ the check
    def check(
        self, agent: BudgetedAgent, cap: CostCap | None = None, now: datetime | None = None
    ) -> list[AlertRow]:
        """Record the alerts the spend has reached (returns the new ones); BudgetExceeded
        when a cap of the agent, the fleet or `cap` is spent."""
        verdict = self.verdict(agent, cap, now)
        if verdict.refusal is not None:
            raise BudgetExceeded(verdict.refusal)
        return verdict.alerts

    def verdict(
        self, agent: BudgetedAgent, cap: CostCap | None = None, now: datetime | None = None
    ) -> Verdict:
        """Record the alerts the spend has reached; the new ones, and why a call is
        refused (a cap of the agent, the fleet or `cap` is spent) or None."""
        now = now or datetime.now(UTC)
        day, month = day_start(now), month_start(now)
        config = agent.llm_config
        agent_caps = (config.daily_budget_usd, config.monthly_budget_usd)
        with self.db.read() as conn:  # one snapshot; a spend nobody caps is not summed
            fleet_caps = self.fleet_caps()
            capped = any(c is not None for c in agent_caps)
            mine = repo.spend(conn, agent.id, day, month) if capped else (0.0, 0.0)
            fleet = repo.spend(conn, None, day, month) if any(fleet_caps) else (0.0, 0.0)
        reached = thresholds_reached(agent.id, agent_caps, mine, now) + thresholds_reached(
            FLEET, fleet_caps, fleet, now
        )
        ticket = [] if cap is None or cap.ticket_id is None else ticket_thresholds(cap)
        new = self.record(reached + ticket, now)
        for row in reached:
            if row.threshold == 100:
                stored = row.scope == FLEET and self.fleet_caps_stored()
                return Verdict(new, exceeded_text(agent.name, row, stored=stored))
        if cap is not None and cap.spent_usd >= cap.limit_usd:
            return Verdict(
                new,
                f"ticket cost limit reached: ${cap.spent_usd:.4f} ({cap.label} {cap.limit_usd:g}); "
                "no further LLM calls in this stretch",
            )
        return Verdict(new, None)

    def record(self, reached: list[AlertRow], now: datetime) -> list[AlertRow]:
        """Record the reached thresholds not recorded yet; returns the new ones."""
        if not reached:
            return []
        with self.db.read() as conn:
            known = {
                (a.scope, a.cap, a.period, a.threshold)
                for a in repo.alerts(conn, day_start(now) - timedelta(days=32), ALERT_LIMIT * 10)
            }
        fresh = [a for a in reached if (a.scope, a.cap, a.period, a.threshold) not in known]
        if not fresh:
            return []
        with self.db.write() as conn:
            return [
                AlertRow(**{**a.__dict__, "created_at": now})
                for a in fresh
                if repo.record_alert(conn, a, now)
            ]

    # ------------------------------------------------------------ reading
    def overview(self, agents: Sequence[BudgetedAgent], now: datetime | None = None) -> Overview:
        """Caps, spend and forecasts of the fleet and of `agents`, their idle cost, and the
        alerts of this month and the last; alerts the spend reached are recorded first."""
        now = now or datetime.now(UTC)
        day, month, end = day_start(now), month_start(now), next_month(now)
        tomorrow = day + timedelta(days=1)
        fleet_caps = self.fleet_caps()
        with self.db.read() as conn:
            fleet = repo.spend(conn, None, day, month)
            spent = repo.spend_by_agent(conn, day, month)
            idle = repo.spend_by_agent(conn, day, month, HEARTBEAT_TASK)
        reached = thresholds_reached(FLEET, fleet_caps, fleet, now)

        def figures(caps: tuple[float | None, float | None], used: tuple[float, float]) -> Spend:
            return Spend(
                daily_cap_usd=caps[0],
                monthly_cap_usd=caps[1],
                today_usd=used[0],
                month_usd=used[1],
                forecast_today_usd=forecast(used[0], day, tomorrow, now),
                forecast_month_usd=forecast(used[1], month, end, now),
            )

        rows = []
        for agent in agents:
            caps = (agent.llm_config.daily_budget_usd, agent.llm_config.monthly_budget_usd)
            used = spent.get(agent.id, (0.0, 0.0))
            reached += thresholds_reached(agent.id, caps, used, now)
            beat = idle.get(agent.id, (0.0, 0.0))
            rows.append(AgentSpend(agent.id, agent.name, figures(caps, used), *beat))
        self.record(reached, now)
        since = month_start(month - timedelta(days=1))  # this month's and the last's
        return Overview(figures(fleet_caps, fleet), rows, self.alerts(since))

    def alerts(self, since: datetime | None = None, limit: int = ALERT_LIMIT) -> list[AlertRow]:
        """Recorded alerts since `since` (or all), newest first."""
        with self.db.read() as conn:
            return repo.alerts(conn, since, limit)


def ticket_thresholds(cap: CostCap) -> list[AlertRow]:
    """The thresholds of a ticket's cap its stretch has reached."""
    assert cap.ticket_id is not None
    scope = ticket_scope(cap.ticket_id)
    return [
        AlertRow(scope, TICKET, TICKET, threshold, cap.limit_usd, cap.spent_usd)
        for threshold in THRESHOLDS
        if cap.spent_usd >= cap.limit_usd * threshold / 100
    ]


def usd(value: float) -> str:
    """A cap in US dollars as it was set: cents at least, and every decimal it has
    ($0.005 stays $0.005, 2 reads $2.00)."""
    text = f"{value:,.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def raise_hint(fleet: bool, period: str, *, stored: bool) -> str:
    """Where the cap that stopped a call is raised: the Budgets page (/budgets) for an
    agent's caps and for fleet caps set there, else the `[budgets]` key that set it."""
    if not fleet:
        return f"raise its {period} cap (llm.{period}_budget_usd) on the Budgets page (/budgets)"
    if stored:
        return f"raise the fleet's {period} cap on the Budgets page (/budgets)"
    return (
        f"raise [budgets] fleet_{period}_usd in the config file, or set the fleet's caps on "
        "the Budgets page (/budgets)"
    )


def exceeded_text(name: str, row: AlertRow, *, stored: bool = False) -> str:
    """Why a call is refused once a cap is spent; `stored`: the fleet's caps were set on
    the Budgets page (or PUT /api/budgets), not in `[budgets]`."""
    fleet = row.scope == FLEET
    whose = "the fleet" if fleet else f"agent {name}"
    until = "00:00 UTC" if row.cap == "daily" else "the first of next month (UTC)"
    return (
        f"{whose} has spent ${row.spent_usd:.4f} of its {usd(row.cap_usd)} {row.cap} budget; "
        f"no further LLM calls until {until} ({raise_hint(fleet, row.cap, stored=stored)} "
        "to continue)"
    )


# ------------------------------------------------------------ delivery
_pending: set[asyncio.Task[None]] = set()


def alert_payload(row: AlertRow, names: dict[str, str]) -> dict[str, Any]:
    """The JSON an alert is delivered as: what was reached, never a key or a token."""
    fleet = row.scope == FLEET
    ticket = ticket_of(row.scope)
    agent = not fleet and ticket is None
    return {
        "event": "budget_alert",
        "scope": "fleet" if fleet else "ticket" if ticket is not None else "agent",
        "agentId": row.scope if agent else None,
        "agentName": names.get(row.scope) if agent else None,
        "ticketId": ticket,
        "cap": row.cap,
        "period": row.period,
        "thresholdPercent": row.threshold,
        "capUsd": row.cap_usd,
        "spentUsd": round(row.spent_usd, 6),
        "at": (row.created_at or datetime.now(UTC)).isoformat(),
    }


def alert_text(row: AlertRow, names: dict[str, str]) -> str:
    """An alert as one line of chat (the message written to the alert outlet)."""
    ticket = ticket_of(row.scope)
    if row.scope == FLEET:
        whose, cap = "the fleet", f"{row.cap} cap ({row.period} UTC)"
    elif ticket is not None:
        whose, cap = f"ticket {ticket}", "maxCostUsd"
    else:
        whose = f"agent {names.get(row.scope, row.scope)}"
        cap = f"{row.cap} budget ({row.period} UTC)"
    return (
        f"Budget alert: {whose} reached {row.threshold}% of its {cap}: "
        f"${row.spent_usd:.4f} of ${row.cap_usd:.2f}"
    )


async def deliver(
    settings: Settings,
    rows: list[AlertRow],
    names: dict[str, str],
    outlets: Mapping[str, MessageOutlet] | None = None,
) -> None:
    """POST each alert to `[budgets] webhook_url` and write it to `[budgets] alert_outlet`
    through the running gateway it names (in `outlets`); failures are logged without the
    URL or the message, never raised."""
    if not rows:
        return
    section = settings.budgets
    if section.webhook_url:
        await _post(section.webhook_url, section.webhook_timeout_secs, rows, names)
    where = section.alert_outlet
    if where is not None:
        outlet = (outlets or {}).get(where.gateway)
        if outlet is None:
            log.warning(
                "budget alerts: the %s gateway is not running in this process", where.gateway
            )
            return
        target = Outlet(gateway=where.gateway, channel=where.channel).target()
        for row in rows:
            message = OutgoingMessage(
                content=MessageContent(text=alert_text(row, names)), target=target
            )
            try:
                await outlet.send(message)
            except Exception as exc:  # a closed gateway, a missing channel, the platform's answer
                log.warning("budget alert to %s failed: %s", where.gateway, type(exc).__name__)


async def _post(url: str, timeout: float, rows: list[AlertRow], names: dict[str, str]) -> None:
    async with httpx.AsyncClient(timeout=timeout) as client:
        for row in rows:
            try:
                response = await client.post(url, json=alert_payload(row, names))
                response.raise_for_status()
            except httpx.HTTPError as exc:  # the URL may hold a token: not logged
                status = getattr(getattr(exc, "response", None), "status_code", None)
                log.warning("budget alert webhook failed: %s %s", type(exc).__name__, status or "")


async def enforce(
    db: Database,
    settings: Settings,
    agent: BudgetedAgent,
    cap: CostCap | None,
    outlets: Mapping[str, MessageOutlet] | None = None,
) -> None:
    """The check before a call: new alerts delivered in the background, then
    BudgetExceeded when a cap is spent."""
    verdict = await run_blocking(Budgets(db, settings).verdict, agent, cap)
    notify(settings, verdict.alerts, {agent.id: agent.name}, outlets)
    if verdict.refusal is not None:
        raise BudgetExceeded(verdict.refusal)


def fleet_caps_of(
    stored: tuple[float | None, float | None] | None, settings: Settings | None
) -> tuple[float | None, float | None]:
    """The fleet's caps: those stored through the API, else `[budgets]`'s."""
    if stored is not None:
        return stored
    if settings is None:
        return None, None
    return settings.budgets.fleet_daily_usd, settings.budgets.fleet_monthly_usd


def notify(
    settings: Settings,
    rows: list[AlertRow],
    names: dict[str, str],
    outlets: Mapping[str, MessageOutlet] | None = None,
) -> None:
    """Deliver new alerts in the background (the caller never waits for the delivery)."""
    section = settings.budgets
    if not rows or (not section.webhook_url and section.alert_outlet is None):
        return
    task = asyncio.get_running_loop().create_task(deliver(settings, rows, names, outlets))
    _pending.add(task)
    task.add_done_callback(_pending.discard)
