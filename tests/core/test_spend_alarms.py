"""Slow-burn alarms (core/spend_alarms.py) on SQLite and PostgreSQL, at a fixed time: the
trailing median, the expected daily spend, an agent spending on its own, and the month's
forecast crossing its line while no daily cap is spent; the numbers behind each."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from opencrab.config import Settings
from opencrab.config.models import SpendAlarms
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.spend_alarms import slow_burn
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from tests.fakes.inbox_items import spend_row

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
TODAY = NOW.replace(hour=0)


@dataclass(frozen=True)
class Budgeted:
    id: str
    name: str
    llm_config: AgentLlmConfig = field(default_factory=AgentLlmConfig)


def spend(db: Database, agent: str, days_ago: int, usd: float, task: str | None) -> None:
    at = TODAY - timedelta(days=days_ago) + timedelta(hours=1)
    with db.write() as conn:
        metrics_repo.insert(conn, [spend_row(agent, at, usd, task)])


@pytest.fixture
def agents() -> list[Budgeted]:
    return [
        Budgeted("a-steady", "steady", AgentLlmConfig(daily_budget_usd=10, monthly_budget_usd=60)),
        Budgeted("a-spiky", "spiky", AgentLlmConfig(daily_budget_usd=4, monthly_budget_usd=10)),
        Budgeted("a-talked", "talked"),
        Budgeted("a-new", "new"),
        Budgeted("a-tiny", "tiny"),
    ]


def test_each_rule_alarms_with_the_numbers_behind_it(
    any_db: Database, settings: Settings, agents: list[Budgeted]
) -> None:
    settings.budgets.alarms = SpendAlarms(expected_daily_usd={"steady": 2.0, "fleet": 100.0})
    for day in range(1, 12):
        spend(any_db, "a-steady", day, 3.0, "heartbeat")  # $3 a day on its own, no chat
        spend(any_db, "a-spiky", day, 1.0, "chat")
        spend(any_db, "a-talked", day, 1.0, "ticket")
    spend(any_db, "a-steady", 0, 3.0, "heartbeat")
    spend(any_db, "a-spiky", 0, 5.0, "chat")  # 5 > 2 x median 1; daily cap 4 spent
    spend(any_db, "a-talked", 0, 1.0, "ticket")
    spend(any_db, "a-talked", 1, 0.01, "chat")  # a person talked to it yesterday
    spend(any_db, "a-new", 0, 4.0, "chat")  # no history: no baseline
    spend(any_db, "a-tiny", 0, 0.1, "heartbeat")  # under min_usd

    report = slow_burn(any_db, settings, agents, NOW)
    by = {b.name: b for b in report.scopes}
    assert report.day == "2026-12-10"
    assert [b.name for b in report.scopes] == ["fleet", "steady", "spiky", "talked", "new", "tiny"]

    steady = by["steady"]
    assert (steady.today_usd, steady.baseline_usd, steady.baseline_days) == (3.0, 3.0, 14 - 3)
    assert steady.unattended_today_usd == 3.0
    assert steady.person_quiet
    rules = {a.rule: a for a in steady.alarms}
    assert set(rules) == {"expected", "unattended", "forecast"}  # 3 is not over 2 x 3
    assert rules["expected"].line_usd == 2.0
    assert "$3.00 today is over the expected $2.00 a day" in rules["expected"].detail
    assert rules["unattended"].key == "unattended:a-steady:2026-12-10"
    # December so far: 9 days + today at $3 = $30 over 9.5 of 31 days: $97.89 >= the $60 cap
    forecast = rules["forecast"]
    assert forecast.period == "2026-12"
    assert forecast.line_usd == 60
    assert forecast.value_usd == pytest.approx(30 / (9.5 / 31))

    spiky = by["spiky"]
    assert spiky.baseline_usd == 1.0
    assert [a.rule for a in spiky.alarms] == ["baseline"]  # its daily cap is spent: no forecast
    assert spiky.alarms[0].line_usd == 2.0
    assert not spiky.person_quiet

    assert by["talked"].alarms == []  # a chat yesterday: not unattended; steady: no baseline
    assert by["talked"].unattended_today_usd == 1.0
    assert not by["talked"].person_quiet
    assert by["new"].baseline_usd is None
    assert by["new"].alarms == []
    assert by["tiny"].alarms == []

    fleet = by["fleet"]
    assert fleet.today_usd == pytest.approx(3 + 5 + 1 + 4 + 0.1)
    assert fleet.expected_usd == 100.0
    assert fleet.unattended_today_usd == 0
    assert not fleet.person_quiet
    assert [a.rule for a in fleet.alarms] == ["baseline"]  # 13.1 > 2 x 5.0
    assert all(a.key.endswith(":2026-12-10") or a.rule == "forecast" for a in report.alarms)


def test_configured_lines_and_a_switch_off(
    any_db: Database, settings: Settings, agents: list[Budgeted]
) -> None:
    spend(any_db, "a-new", 0, 4.0, "chat")
    settings.budgets.alarms = SpendAlarms(forecast_month_usd={"a-new": 10.0})  # by id
    [alarm] = slow_burn(any_db, settings, agents, NOW).alarms
    assert (alarm.rule, alarm.scope, alarm.line_usd) == ("forecast", "a-new", 10.0)
    assert alarm.value_usd == pytest.approx(4 / (9.5 / 31))
    settings.budgets.alarms = SpendAlarms(enabled=False, forecast_month_usd={"new": 10.0})
    assert slow_burn(any_db, settings, agents, NOW).alarms == []


def test_bad_alarm_config_is_refused_naming_the_key() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="baseline_factor"):
        SpendAlarms(baseline_factor=0.5)
    with pytest.raises(ValidationError, match="expected_daily_usd"):
        SpendAlarms(expected_daily_usd={"fleet": -1})
    with pytest.raises(ValidationError, match="nope"):
        SpendAlarms.model_validate({"nope": 1})
