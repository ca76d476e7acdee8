"""Memory lines have a time, and a question naming a time looks there: the parser of
English and Japanese time expressions (core/memory_time.py), and search within the span
it names on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog, content_words
from opencrab.core.memory_time import number, time_window
from opencrab.errors import ValidationError
from opencrab.store import Database
from opencrab.store.tables import memory_sessions

TOKYO = timezone(timedelta(hours=9))
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=TOKYO)  # a Wednesday
S1 = "11111111-1111-4111-8111-111111111111"


def span(query: str, now: datetime = NOW) -> tuple[date, date, str, str] | None:
    window = time_window(query, now)
    if window is None:
        return None
    local = now.tzinfo
    return (
        window.start.astimezone(local).date(),
        window.end.astimezone(local).date(),
        window.phrase,
        window.rest,
    )


D = date


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did we decide last Tuesday", (D(2026, 12, 1), D(2026, 12, 2), "last Tuesday")),
        ("what did we decide on Monday?", (D(2026, 11, 30), D(2026, 12, 1), "on Monday")),
        ("this Monday", (D(2026, 11, 30), D(2026, 12, 1), "this Monday")),
        ("yesterday's plan", (D(2026, 12, 1), D(2026, 12, 2), "yesterday")),
        ("the day before yesterday", (D(2026, 11, 30), D(2026, 12, 1), None)),
        ("today", (D(2026, 12, 2), D(2026, 12, 3), "today")),
        ("3 days ago", (D(2026, 11, 29), D(2026, 11, 30), "3 days ago")),
        ("three days ago", (D(2026, 11, 29), D(2026, 11, 30), "three days ago")),
        ("a week ago", (D(2026, 11, 22), D(2026, 11, 29), "a week ago")),
        ("two months ago", (D(2026, 10, 1), D(2026, 11, 1), "two months ago")),
        ("last week", (D(2026, 11, 23), D(2026, 11, 30), "last week")),
        ("this week", (D(2026, 11, 30), D(2026, 12, 7), "this week")),
        ("last month", (D(2026, 11, 1), D(2026, 12, 1), "last month")),
        ("last year", (D(2025, 1, 1), D(2026, 1, 1), "last year")),
        ("in the past 7 days", (D(2026, 11, 25), D(2026, 12, 3), None)),
        ("in November", (D(2026, 11, 1), D(2026, 12, 1), "in November")),
        ("in December 2025", (D(2025, 12, 1), D(2026, 1, 1), None)),
        ("on Nov 24", (D(2026, 11, 24), D(2026, 11, 25), "Nov 24")),
        ("December 25", (D(2025, 12, 25), D(2025, 12, 26), None)),  # not yet this year
        ("24th of November 2025", (D(2025, 11, 24), D(2025, 11, 25), None)),
        ("2026-11-24 deploy", (D(2026, 11, 24), D(2026, 11, 25), "2026-11-24")),
        ("先週の火曜日に何を決めた？", (D(2026, 11, 24), D(2026, 11, 25), "先週の火曜日")),
        ("先週火曜", (D(2026, 11, 24), D(2026, 11, 25), "先週火曜")),
        ("今週の月曜日", (D(2026, 11, 30), D(2026, 12, 1), None)),
        ("火曜日の会議", (D(2026, 12, 1), D(2026, 12, 2), "火曜日")),
        ("昨日の話", (D(2026, 12, 1), D(2026, 12, 2), "昨日")),
        ("きのう", (D(2026, 12, 1), D(2026, 12, 2), None)),
        ("一昨日", (D(2026, 11, 30), D(2026, 12, 1), None)),
        ("おととい", (D(2026, 11, 30), D(2026, 12, 1), None)),
        ("今日", (D(2026, 12, 2), D(2026, 12, 3), None)),
        ("3日前", (D(2026, 11, 29), D(2026, 11, 30), "3日前")),
        ("３日前", (D(2026, 11, 29), D(2026, 11, 30), "3日前")),  # full-width digits
        ("三日前のこと", (D(2026, 11, 29), D(2026, 11, 30), "三日前")),
        ("二十日前", (D(2026, 11, 12), D(2026, 11, 13), None)),
        ("2週間前", (D(2026, 11, 15), D(2026, 11, 22), None)),
        ("1ヶ月前", (D(2026, 11, 1), D(2026, 12, 1), None)),
        ("先週", (D(2026, 11, 23), D(2026, 11, 30), None)),
        ("先月の会議", (D(2026, 11, 1), D(2026, 12, 1), "先月")),
        ("去年", (D(2025, 1, 1), D(2026, 1, 1), None)),
        ("過去7日", (D(2026, 11, 25), D(2026, 12, 3), None)),
        ("2026年11月24日", (D(2026, 11, 24), D(2026, 11, 25), None)),
        ("11月24日の件", (D(2026, 11, 24), D(2026, 11, 25), "11月24日")),
        ("2025年3月", (D(2025, 3, 1), D(2025, 4, 1), None)),
    ],
)
def test_time_expressions_name_their_span(query: str, expected: tuple) -> None:  # type: ignore[type-arg]
    found = span(query)
    assert found is not None, query
    assert found[:2] == expected[:2]
    if expected[2] is not None:
        assert found[2] == expected[2]


@pytest.mark.parametrize(
    "query", ["the cat called Tama", "猫の名前", "version 3 release", "ticket 1234", "Mayday"]
)
def test_queries_without_a_time_have_no_span(query: str) -> None:
    assert time_window(query, NOW) is None


def test_the_rest_of_the_query_is_kept_and_the_zone_counts() -> None:
    found = span("what did we decide last Tuesday")
    assert found is not None
    assert found[3] == "what did we decide"
    assert span("先週の火曜日に何を決めた？") == (
        D(2026, 11, 24),
        D(2026, 11, 25),
        "先週の火曜日",
        "に何を決めた",
    )
    # 01:00 on Wednesday in Tokyo is still Tuesday in UTC: "yesterday" differs by zone
    early = datetime(2026, 12, 2, 1, 0, tzinfo=TOKYO)
    tokyo = time_window("yesterday", early)
    utc = time_window("yesterday", early.astimezone(UTC))
    assert tokyo is not None
    assert utc is not None
    assert tokyo.start == datetime(2026, 11, 30, 15, 0, tzinfo=UTC)  # Dec 1, 00:00 JST
    assert utc.start == datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="aware"):
        time_window("yesterday", datetime(2026, 12, 2))


def test_numbers_in_words_and_kanji() -> None:
    assert [number(t) for t in ("3", "３", "three", "a", "十", "二十一", "百", "x")] == [
        3,
        3,
        3,
        1,
        10,
        21,
        100,
        None,
    ]
    assert content_words("what did we decide") == ["decide"]
    assert content_words("に何を決めた") == ["決"]
    assert content_words("what was decided about the meetings") == ["decid", "meeting"]


# ------------------------------------------------------------------ search in a span
@pytest.fixture
def memory(any_db: Database, settings: Settings) -> MemoryManager:
    return MemoryManager(any_db, AgentStore(any_db, settings).create(AgentCreate(name="a")).id)


def said(memory: MemoryManager, content: str, at: datetime) -> int:
    memory.append_session_log(SessionLog(session_id=S1, log_type="speech", content=content))
    with memory.db.write() as conn:
        top = conn.execute(sa.select(sa.func.max(memory_sessions.c.id))).scalar_one()
        conn.execute(
            memory_sessions.update().where(memory_sessions.c.id == top).values(created_at=at)
        )
    return int(top)


def at(day: date, hour: int = 12) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=TOKYO).astimezone(UTC)


def test_a_question_about_last_tuesday_finds_what_was_decided_then(
    memory: MemoryManager,
) -> None:
    said(memory, "We decided to ship the beta on Friday", at(D(2026, 11, 24)))
    said(memory, "We decided to move the office", at(D(2026, 11, 17)))  # a week before
    tuesday = said(memory, "We decided to rename the project to Kani", at(D(2026, 12, 1)))
    lunch = said(memory, "lunch was good", at(D(2026, 12, 1), 13))
    found = memory.search_in_time("what did we decide last Tuesday", now=NOW)
    assert found.window is not None
    assert found.window.phrase == "last Tuesday"
    # the decision first (it holds "decide"), then the day's other line; no other day's
    assert [h.id for h in found.hits] == [tuesday, lunch]
    # the time of each hit is its line's: aware, as written
    assert found.hits[0].created_at == at(D(2026, 12, 1))


def test_japanese_questions_about_time(memory: MemoryManager) -> None:
    said(memory, "ベータ版は金曜日に出すと決めた", at(D(2026, 11, 24)))
    said(memory, "事務所を移すと決めた", at(D(2026, 11, 17)))
    said(memory, "昼ご飯の話", at(D(2026, 11, 24), 13))
    yesterday = said(memory, "名前をカニに変えた", at(D(2026, 12, 1)))
    three_days = said(memory, "猫のタマが来た", at(D(2026, 11, 29)))
    found = memory.search_in_time("先週の火曜日に何を決めた？", now=NOW)
    assert [h.content for h in found.hits] == ["ベータ版は金曜日に出すと決めた", "昼ご飯の話"]
    assert [h.id for h in memory.search("昨日", now=NOW)] == [yesterday]
    assert [h.id for h in memory.search("3日前のこと", now=NOW)] == [three_days]
    assert memory.search("一昨年", now=NOW) == []


def test_a_time_filters_and_words_rank_within_it(memory: MemoryManager) -> None:
    said(memory, "the release plan is ready", at(D(2026, 12, 1), 9))
    said(memory, "release notes drafted", at(D(2026, 12, 1), 10))
    said(memory, "unrelated chatter", at(D(2026, 12, 1), 11))
    said(memory, "the release plan was dropped", at(D(2026, 11, 20)))
    hits = memory.search("release plan yesterday", now=NOW)
    # every word first, then some words, then the span's other lines; nothing outside it
    assert [h.content for h in hits] == [
        "the release plan is ready",
        "release notes drafted",
        "unrelated chatter",
    ]
    assert [h.content for h in memory.search("release plan yesterday", limit=1, now=NOW)] == [
        "the release plan is ready"
    ]
    # without a time the search is as before: every word, any time
    assert {h.content for h in memory.search("release plan", now=NOW)} == {
        "the release plan is ready",
        "the release plan was dropped",
    }
    with pytest.raises(ValidationError):
        memory.search("   ", now=NOW)
