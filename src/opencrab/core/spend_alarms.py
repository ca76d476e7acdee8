"""Slow-burn alarms (issue 37, section 3): spend that no cap stops but a person should hear of.

Caps (core/budgets.py) alert at 80 % and 100 %; an agent that quietly costs the same
every day never reaches one. Per agent and for the fleet, from the daily rollup
(`llm_usage_daily`), these rules raise an alarm (`[budgets.alarms]`):

- `baseline`: today's spend is above `baseline_factor` x the median of the scope's
  trailing `baseline_days` days (days without spend count as $0, from the first day it
  spent in the window; at least 3 such days are needed);
- `expected`: today's spend is above the scope's `expected_daily_usd`;
- `unattended`: an agent spent today on its own (heartbeats, tickets, schedules: any
  call whose task type is not one a person starts) while no person-started call
  (chat, discussion, CLI, preview) was made today or on the `unattended_quiet_days`
  days before;
- `forecast`: the month's forecast (core/budgets.forecast) is at or above the scope's
  `forecast_month_usd` (default: its monthly cap) while its daily cap, if any, is not spent.

Today's spend must be at least `min_usd` for the first three. An alarm is one per rule,
scope and day (`forecast`: per month); its `key` is stable, so the inbox lists it once
and its notification is sent once. A day is a UTC day.

Example:
    burn = slow_burn(db, settings, runtime.agents.list())
    [a.key for a in burn.alarms]   # ["baseline:<agent id>:2026-12-02", …]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from opencrab.config import Settings
from opencrab.config.models import SpendAlarms
from opencrab.core.budgets import (
    BudgetedAgent,
    day_start,
    fleet_caps_of,
    forecast,
    month_start,
    next_month,
)
from opencrab.store import Database
from opencrab.store.repositories import budgets as repo
from opencrab.store.repositories.budgets import FLEET

PERSON_STARTED = frozenset({"chat", "discussion", "cli", "preview"})
"""Task types of calls a person started; every other one an agent makes on its own."""
MIN_BASELINE_DAYS = 3
RULES = ("baseline", "expected", "unattended", "forecast")


@dataclass(frozen=True)
class Alarm:
    """One alarm: the rule, whose (FLEET or an agent id), the day (or month), the line
    crossed and the figure that crossed it, and the numbers behind it in words."""

    rule: str
    scope: str
    name: str
    period: str
    value_usd: float
    line_usd: float
    detail: str

    @property
    def key(self) -> str:
        """Stable across reads: `<rule>:<scope>:<period>`."""
        return f"{self.rule}:{self.scope}:{self.period}"

    @property
    def agent_id(self) -> str | None:
        return None if self.scope == FLEET else self.scope


@dataclass(frozen=True)
class Burn:
    """The numbers of one scope (the fleet or an agent) the rules read."""

    scope: str
    name: str
    today_usd: float
    baseline_usd: float | None  # the trailing median; None: too little history
    baseline_days: int  # the days the median is over
    expected_usd: float | None
    unattended_today_usd: float
    person_quiet: bool  # no person-started call today or on the quiet days before
    forecast_month_usd: float
    forecast_line_usd: float | None
    alarms: list[Alarm] = field(default_factory=list)


@dataclass(frozen=True)
class BurnReport:
    """Every scope's numbers (the fleet first) and all their alarms."""

    day: str
    scopes: list[Burn]

    @property
    def alarms(self) -> list[Alarm]:
        return [a for s in self.scopes for a in s.alarms]


def _looked_up(table: dict[str, float], agent: BudgetedAgent | None) -> float | None:
    if agent is None:
        return table.get("fleet")
    found = table.get(agent.name)
    return table.get(agent.id) if found is None else found


def _median(days: list[float]) -> float | None:
    return statistics.median(days) if len(days) >= MIN_BASELINE_DAYS else None


def slow_burn(
    db: Database,
    settings: Settings | None,
    agents: Sequence[BudgetedAgent],
    now: datetime | None = None,
) -> BurnReport:
    """The fleet's and `agents`' numbers and alarms (see the module docstring)."""
    now = now or datetime.now(UTC)
    rules = settings.budgets.alarms if settings is not None else SpendAlarms()
    today = day_start(now)
    window = [
        (today - timedelta(days=n)).strftime("%Y-%m-%d") for n in range(rules.baseline_days, 0, -1)
    ]
    first = window[0]
    month, end = month_start(now), next_month(now)
    with db.read() as conn:
        rows = repo.daily_spend(conn, min(first, month.strftime("%Y-%m-%d")))
        stored_caps = repo.fleet_caps(conn)
    fleet_caps = fleet_caps_of(stored_caps, settings)
    day_key = today.strftime("%Y-%m-%d")
    quiet_from = (today - timedelta(days=rules.unattended_quiet_days)).strftime("%Y-%m-%d")
    by_day: dict[str, dict[str, float]] = {}  # scope -> day -> usd
    month_usd: dict[str, float] = {}
    own_today: dict[str, float] = {}
    person_days: set[str] = set()  # agents with a person-started call in the quiet days
    for agent_id, day, task, usd in rows:
        for scope in (agent_id, FLEET):
            days = by_day.setdefault(scope, {})
            days[day] = days.get(day, 0.0) + usd
            if day >= month.strftime("%Y-%m-%d"):
                month_usd[scope] = month_usd.get(scope, 0.0) + usd
        if task in PERSON_STARTED:
            if day >= quiet_from:
                person_days.add(agent_id)
        elif day == day_key:
            own_today[agent_id] = own_today.get(agent_id, 0.0) + usd
    scopes = [
        _burn(
            FLEET,
            "fleet",
            None,
            by_day,
            month_usd,
            own_today,
            person_days,
            fleet_caps,
            rules,
            window,
            day_key,
            now,
            month,
            end,
        )
    ]
    for agent in agents:
        caps = (agent.llm_config.daily_budget_usd, agent.llm_config.monthly_budget_usd)
        scopes.append(
            _burn(
                agent.id,
                agent.name,
                agent,
                by_day,
                month_usd,
                own_today,
                person_days,
                caps,
                rules,
                window,
                day_key,
                now,
                month,
                end,
            )
        )
    return BurnReport(day_key, scopes)


def _burn(
    scope: str,
    name: str,
    agent: BudgetedAgent | None,
    by_day: dict[str, dict[str, float]],
    month_usd: dict[str, float],
    own_today: dict[str, float],
    person_days: set[str],
    caps: tuple[float | None, float | None],
    rules: SpendAlarms,
    window: list[str],
    day_key: str,
    now: datetime,
    month: datetime,
    end: datetime,
) -> Burn:
    days = by_day.get(scope, {})
    today_usd = days.get(day_key, 0.0)
    spent_days = [d for d in window if days.get(d, 0.0) > 0]
    history = window[window.index(spent_days[0]) :] if spent_days else []
    baseline = _median([days.get(d, 0.0) for d in history])
    expected = _looked_up(rules.expected_daily_usd, agent)
    unattended = own_today.get(scope, 0.0) if agent is not None else 0.0
    quiet = agent is not None and scope not in person_days
    month_forecast = forecast(month_usd.get(scope, 0.0), month, end, now)
    line = _looked_up(rules.forecast_month_usd, agent)
    line = caps[1] if line is None else line
    alarms: list[Alarm] = []
    if rules.enabled:
        loud = today_usd >= rules.min_usd and today_usd > 0
        if loud and baseline is not None and today_usd > baseline * rules.baseline_factor:
            alarms.append(
                Alarm(
                    "baseline",
                    scope,
                    name,
                    day_key,
                    today_usd,
                    baseline * rules.baseline_factor,
                    f"${today_usd:.2f} today is over {rules.baseline_factor:g} x the median "
                    f"${baseline:.2f} of the last {len(history)} days",
                )
            )
        if loud and expected is not None and today_usd > expected:
            alarms.append(
                Alarm(
                    "expected",
                    scope,
                    name,
                    day_key,
                    today_usd,
                    expected,
                    f"${today_usd:.2f} today is over the expected ${expected:.2f} a day",
                )
            )
        if quiet and unattended >= rules.min_usd and unattended > 0:
            alarms.append(
                Alarm(
                    "unattended",
                    scope,
                    name,
                    day_key,
                    unattended,
                    rules.min_usd,
                    f"${unattended:.2f} spent today on its own (heartbeats, tickets, "
                    f"schedules) with no chat or discussion since {_since(day_key, rules)}",
                )
            )
        daily_spent = caps[0] is not None and today_usd >= caps[0]
        if line is not None and month_forecast >= line and line > 0 and not daily_spent:
            alarms.append(
                Alarm(
                    "forecast",
                    scope,
                    name,
                    month.strftime("%Y-%m"),
                    month_forecast,
                    line,
                    f"this month is on course for ${month_forecast:.2f}, at or over "
                    f"${line:.2f}, though no daily cap stopped it",
                )
            )
    return Burn(
        scope=scope,
        name=name,
        today_usd=today_usd,
        baseline_usd=baseline,
        baseline_days=len(history),
        expected_usd=expected,
        unattended_today_usd=unattended,
        person_quiet=quiet,
        forecast_month_usd=month_forecast,
        forecast_line_usd=line,
        alarms=alarms,
    )


def _since(day_key: str, rules: SpendAlarms) -> str:
    start = datetime.strptime(day_key, "%Y-%m-%d").replace(tzinfo=UTC)
    return (start - timedelta(days=rules.unattended_quiet_days)).strftime("%Y-%m-%d")
