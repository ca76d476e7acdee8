"""A schedule's timing (schedules/spec.py): cron in a time zone across DST and time-zone
boundaries, intervals, one shots, and the bad input each entry point refuses naming the
field."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from opencrab.errors import ValidationError
from opencrab.schedules.spec import checked, latest_slot, next_slot, parse_input


class Timing:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


TURN = {"kind": "turn", "prompt": "Write the stand-up summary"}


def timing(now: datetime, **given: Any) -> Timing:
    return Timing(checked(parse_input({**given, "action": TURN}), now, min_interval_secs=60))


def slots(t: Timing, after: datetime, n: int) -> list[datetime]:
    found: list[datetime] = []
    for _ in range(n):
        slot = next_slot(t, after)
        assert slot is not None
        found.append(slot)
        after = slot
    return found


def test_cron_in_berlin_skips_the_spring_gap_once_and_runs_the_autumn_overlap_once() -> None:
    # 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day
    t = timing(datetime(2026, 3, 27, 12, tzinfo=UTC), cron="30 2 * * *", timezone="Europe/Berlin")
    spring = slots(t, t.anchor_at, 3)
    assert spring == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),  # 02:30 CET
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # the gap: 03:00 CEST, once
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]
    # 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens twice, runs once
    t = timing(datetime(2026, 10, 23, 12, tzinfo=UTC), cron="30 2 * * *", timezone="Europe/Berlin")
    autumn = slots(t, t.anchor_at, 3)
    assert autumn == [
        datetime(2026, 10, 24, 0, 30, tzinfo=UTC),  # 02:30 CEST
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # the first 02:30 only
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),  # 02:30 CET
    ]
    assert len(set(autumn)) == 3


def test_hourly_cron_across_the_new_york_fall_back_runs_each_utc_hour_once() -> None:
    # 1 November 2026, 02:00 EDT becomes 01:00 EST: local 01:00 comes twice
    t = timing(
        datetime(2026, 11, 1, 3, 30, tzinfo=UTC), cron="0 * * * *", timezone="America/New_York"
    )
    found = slots(t, t.anchor_at, 4)
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(found)}
    assert len(set(found)) == 4
    assert gaps <= {3600.0, 7200.0}  # never twice the same instant, never closer than an hour


def test_the_time_zone_decides_the_day_a_weekday_cron_falls_on() -> None:
    # Monday 09:00 in Tokyo is Monday 00:00 UTC; in Honolulu Monday 19:00 UTC
    monday = datetime(2026, 12, 6, 12, tzinfo=UTC)  # a Sunday
    tokyo = timing(monday, cron="0 9 * * 1", timezone="Asia/Tokyo")
    honolulu = timing(monday, cron="0 9 * * 1", timezone="Pacific/Honolulu")
    assert next_slot(tokyo, monday) == datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
    assert next_slot(honolulu, monday) == datetime(2026, 12, 7, 19, 0, tzinfo=UTC)
    # midnight on the first of the month in Kiritimati (UTC+14) is the day before in UTC
    kiritimati = timing(monday, cron="0 0 1 * *", timezone="Pacific/Kiritimati")
    assert next_slot(kiritimati, monday) == datetime(2026, 12, 31, 10, 0, tzinfo=UTC)


def test_latest_slot_is_the_last_one_due_and_none_before_the_first() -> None:
    now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    t = timing(now, cron="*/5 * * * *", timezone="UTC")
    assert latest_slot(t, now + timedelta(minutes=3)) is None  # none since it was made
    assert latest_slot(t, now + timedelta(minutes=17)) == now + timedelta(minutes=15)
    assert latest_slot(t, now + timedelta(minutes=15)) == now + timedelta(minutes=15)
    every = timing(now, everySecs=120)
    assert next_slot(every, now) == now + timedelta(seconds=120)
    assert next_slot(every, now + timedelta(seconds=130)) == now + timedelta(seconds=240)
    assert latest_slot(every, now + timedelta(seconds=119)) is None
    assert latest_slot(every, now + timedelta(seconds=1000)) == now + timedelta(seconds=960)
    once = timing(now, at=(now + timedelta(hours=1)).isoformat())
    assert next_slot(once, now) == now + timedelta(hours=1)
    assert next_slot(once, now + timedelta(hours=1)) is None
    assert latest_slot(once, now + timedelta(hours=2)) == now + timedelta(hours=1)


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"cron": "61 * * * *", "timezone": "UTC"}, "cron:"),
        ({"cron": "0 0 30 2 *", "timezone": "UTC"}, "cron:"),  # never: 30 February
        ({"cron": "0 9 * * * *", "timezone": "UTC"}, "cron:"),  # 6 fields
        ({"cron": "* * * * *", "timezone": "UTC"}, "cron:"),  # every minute: under 120 s
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"}, "timezone:"),
        ({"cron": "0 9 * * *", "timezone": "../../etc/passwd"}, "timezone:"),
        ({"cron": "0 9 * * *"}, "timezone:"),
        ({"everySecs": 30}, "everySecs:"),
        ({"everySecs": 60, "timezone": "UTC"}, "timezone:"),
        ({"at": "2020-01-01T00:00:00+00:00"}, "at:"),
        ({"at": "2030-01-01T00:00:00"}, "at:"),  # no offset
        ({}, "timing:"),
        ({"everySecs": 600, "cron": "0 9 * * *", "timezone": "UTC"}, "timing:"),
        ({"everySecs": 600, "action": {"kind": "turn"}}, "action.prompt:"),
        ({"everySecs": 600, "action": {"kind": "ticket"}}, "action.template:"),
        ({"everySecs": 600, "action": {"kind": "post", "prompt": "hi"}}, "action.home:"),
        (
            {"everySecs": 600, "action": {"kind": "turn", "prompt": "x", "sessionId": "no"}},
            "action.sessionId:",
        ),
        ({"everySecs": 600, "action": {"kind": "mail", "prompt": "x"}}, "action.kind:"),
        ({"everySecs": 600, "colour": "red"}, "colour:"),
    ],
)
def test_bad_input_is_refused_naming_the_field(given: dict[str, Any], field: str) -> None:
    now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

    def check() -> None:
        checked(parse_input({"action": TURN, **given}), now, min_interval_secs=120)

    with pytest.raises(ValidationError) as refused:
        check()
    assert str(refused.value).startswith(field), str(refused.value)
