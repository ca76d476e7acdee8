"""The analytics aggregates on SQLite and PostgreSQL, over a store with known activity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from opencrab.store.database import Database
from opencrab.store.repositories import analytics as repo
from tests.fakes.analytics_store import SAKURA, SKILL, TARO, seed_analytics


def test_speech_heartbeats_and_skill_changes_by_day(any_db: Database) -> None:
    seeded = seed_analytics(any_db)
    a, b = seeded.ids[SAKURA], seeded.ids[TARO]
    d0, d1, d2 = seeded.days
    with any_db.read() as conn:
        assert repo.speech_by_day(conn, agent_id=None, since=None) == sorted(
            [(d0, a, 3), (d2, a, 2), (d1, b, 1)]
        )
        assert repo.speech_by_day(conn, agent_id=b, since=None) == [(d1, b, 1)]
        beats = repo.heartbeats_by_day(conn, agent_id=None, since=None)
        assert beats == [
            (d0, "speak", 2),
            (d1, "idle", 1),
            (d2, "idle", 3),
            (d2, "learn", 1),
            (d2, "skip", 1),
        ]
        assert repo.heartbeats_by_day(conn, agent_id=a, since=None)[-1] == (d2, "skip", 1)
        assert repo.skill_changes_by_day(conn, agent_id=None, since=None) == [
            (d0, "created", 1),
            (d1, "created", 1),
            (d2, "refined", 1),
        ]
        assert repo.skill_changes_by_day(conn, agent_id=b, since=None) == [(d1, "created", 1)]
        assert repo.actions_by_day(conn, agent_id=None, since=None) == [
            (d1, "reflect_and_learn", 1),
            (d1, "send_speech", 1),
            (d2, "send_speech", 2),
        ]


def test_the_period_bounds_every_count(any_db: Database) -> None:
    seeded = seed_analytics(any_db)
    since = datetime.now(UTC) - timedelta(hours=1)  # only the newest day's rows
    d2 = seeded.days[2]
    with any_db.read() as conn:
        assert repo.speech_by_day(conn, agent_id=None, since=since) == [(d2, seeded.ids[SAKURA], 2)]
        assert repo.skill_changes_by_day(conn, agent_id=None, since=since) == [(d2, "refined", 1)]
        assert repo.impression_rows(conn, since=since) == []
        assert repo.discussion_replies(conn, since=since) == {}


def test_skill_totals_sum_use_and_average_effectiveness(any_db: Database) -> None:
    seeded = seed_analytics(any_db)
    with any_db.read() as conn:
        fleet = repo.skill_totals(conn, agent_id=None)
        one = repo.skill_totals(conn, agent_id=seeded.ids[SAKURA])
    assert [(t.name, t.agents, t.usage_count, t.actions) for t in fleet] == [
        (SKILL, 2, 5, ["send_speech"]),
        ("振り返り", 1, 0, []),
    ]
    assert fleet[0].effectiveness is not None
    assert abs(fleet[0].effectiveness - 0.7) < 1e-9
    assert fleet[1].effectiveness is None
    assert [(t.name, t.usage_count, t.effectiveness) for t in one] == [(SKILL, 4, 0.8)]


def test_impressions_and_who_answered_whom(any_db: Database) -> None:
    seeded = seed_analytics(any_db)
    a, b = seeded.ids[SAKURA], seeded.ids[TARO]
    with any_db.read() as conn:
        rows = repo.impression_rows(conn, since=None)
        replies = repo.discussion_replies(conn, since=None)
    assert sorted((r.agent_id, r.target_name, r.agreement) for r in rows) == sorted(
        [(a, TARO, "賛成"), (b, SAKURA, "反対"), (a, "司会者", "中立")]
    )
    # 司会者, さくら, たろう, さくら, さくら, たろう: a repeated speaker answers nobody
    assert replies == {(a, "human"): 1, (b, a): 2, (a, b): 1}
