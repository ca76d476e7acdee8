"""Time in memory questions: "what did we decide last Tuesday" as a window of time.

`time_window(query, now)` finds the first expression of time in a search query, in
English or Japanese, and gives the span of time it means (start inclusive, end
exclusive, both aware UTC datetimes) with the rest of the query; None when the query
names no time. Days are counted in `now`'s time zone (the caller's: the server's local
zone by default). The forms understood:

- days: today, yesterday, the day before yesterday, N days ago, (on / last / this)
  Monday…Sunday (a bare or "last" weekday is the latest such day before today; "this"
  the one of this week); 今日, 本日, 昨日, きのう, 一昨日, おととい, N日前, 月曜日…日曜日
  (先週の / 今週の / 先々週の weekday: that day of that week, weeks starting on Monday);
- weeks, months, years: last / this week, month, year, N weeks / months / years ago,
  the last / past N days or weeks; 先週, 今週, 先々週, 先月, 今月, 去年, 昨年, 今年, 一昨年,
  N週間前, Nか月前 (ヶ月, カ月, ヵ月), N年前, 過去N日, ここN日, 最近N日;
- dates: 2026-11-24, 2026/11/24, November 24 (2026), 24 November, Nov 24,
  2026年11月24日, 11月24日, 11/24 (a date without a year is its latest occurrence up
  to today), in November, 2026年11月, 11月 (the month).

Numbers may be digits (full-width too), English words up to twenty, or kanji numerals.
No library parses both languages' relative forms well enough to be worth a dependency
(dateparser's Japanese misses 先週の火曜日); this parser is small and tested.

Example:
    window = time_window("what did we decide last Tuesday", now)
    window.start, window.end, window.rest   # that Tuesday 00:00, the next day, "what did we decide"
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS_JA = "月火水木金土日"
MONTHS_EN = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
NUMBER_WORDS = {
    word: n
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
NUMBER_WORDS.update({"a": 1, "an": 1, "a couple of": 2, "a few": 3})
KANJI_DIGITS = {c: i for i, c in enumerate("〇一二三四五六七八九")}


@dataclass(frozen=True)
class TimeWindow:
    """The span a query's time expression means: [start, end), aware UTC."""

    start: datetime
    end: datetime
    phrase: str  # the expression as written in the query
    rest: str  # the query without it

    def as_json(self) -> dict[str, str]:
        return {"from": self.start.isoformat(), "to": self.end.isoformat(), "phrase": self.phrase}


def number(text: str) -> int | None:
    """`text` as a number: digits (full-width too), an English word, or kanji numerals."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    if text.isdigit():
        return int(text)
    if text in NUMBER_WORDS:
        return NUMBER_WORDS[text]
    if text and all(c in KANJI_DIGITS or c in "十百" for c in text):
        return _kanji(text)
    return None


def _kanji(text: str) -> int | None:
    total, digit = 0, None
    for c in text:
        if c == "百":
            total += (digit or 1) * 100
            digit = None
        elif c == "十":
            total += (digit or 1) * 10
            digit = None
        else:
            digit = (digit or 0) * 10 + KANJI_DIGITS[c]
    return total + (digit or 0)


NUM = (
    r"(\d+|[〇一二三四五六七八九十百]+|a couple of|a few|an?|"
    + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
    + ")"
)
WEEKDAY_EN = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
WEEKDAY_JA = r"([月火水木金土日])曜(?:日)?"
MONTH_EN = (
    r"(" + "|".join(m[:3] + f"(?:{m[3:]})?" if len(m) > 3 else m for m in MONTHS_EN) + r")\.?"
)


def _day(d: date) -> tuple[date, date]:
    return d, d + timedelta(days=1)


def _week(d: date) -> tuple[date, date]:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=7)


def _month(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    return start, date(year, month, calendar.monthrange(year, month)[1]) + timedelta(days=1)


def _months_back(today: date, n: int) -> tuple[date, date]:
    index = today.year * 12 + today.month - 1 - n
    return _month(index // 12, index % 12 + 1)


def _latest_weekday(today: date, weekday: int) -> date:
    """The latest `weekday` before today."""
    back = (today.weekday() - weekday) % 7 or 7
    return today - timedelta(days=back)


def _latest_date(today: date, month: int, day: int) -> date | None:
    """The latest month/day up to today (this year's, else last year's)."""
    for year in (today.year, today.year - 1):
        try:
            found = date(year, month, day)
        except ValueError:
            continue
        if found <= today:
            return found
    return None


def _latest_month(today: date, month: int) -> tuple[date, date]:
    year = today.year if month <= today.month else today.year - 1
    return _month(year, month)


def _date(year: int, month: int, day: int) -> tuple[date, date] | None:
    try:
        return _day(date(year, month, day))
    except ValueError:
        return None


Span = tuple[date, date] | None
Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], Span]]


def _n(match: re.Match[str], group: int = 1) -> int:
    value = number(match.group(group))
    return 0 if value is None else value


def _en_weekday(name: str) -> int:
    name = name.lower()
    return WEEKDAYS_EN.index(name if name in WEEKDAYS_EN else name[:-1])


def _en_month(name: str) -> int:
    key = name.lower().rstrip(".")[:3]
    return [m[:3] for m in MONTHS_EN].index(key) + 1


def _ago(unit: str, n: int, today: date) -> Span:
    unit = unit.lower()
    if unit.startswith(("day", "日")):
        return _day(today - timedelta(days=n))
    if unit.startswith(("week", "週")):
        middle = today - timedelta(days=7 * n)
        return middle - timedelta(days=3), middle + timedelta(days=4)
    if unit.startswith(("month", "か", "ヶ", "カ", "ヵ", "ケ", "箇")):
        return _months_back(today, n)
    if unit.startswith(("year", "年")):
        return date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1)
    return None


def _past(unit: str, n: int, today: date) -> Span:
    days = n * 7 if unit.lower().startswith(("week", "週")) else n
    return today - timedelta(days=days), today + timedelta(days=1)


_RULES: list[Rule] = []


def rule(pattern: str) -> Callable[[Callable[[re.Match[str], date], Span]], None]:
    def add(make: Callable[[re.Match[str], date], Span]) -> None:
        _RULES.append((re.compile(pattern, re.IGNORECASE), make))

    return add


# ------------------------------------------------------------------ dates (most specific first)
@rule(r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?")
def _iso(m: re.Match[str], today: date) -> Span:
    return _date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


@rule(r"(\d{1,2})\s*月\s*(\d{1,2})\s*日")
def _ja_month_day(m: re.Match[str], today: date) -> Span:
    found = _latest_date(today, int(m.group(1)), int(m.group(2)))
    return None if found is None else _day(found)


@rule(r"(\d{4})\s*年\s*(\d{1,2})\s*月")
def _ja_year_month(m: re.Match[str], today: date) -> Span:
    month = int(m.group(2))
    return _month(int(m.group(1)), month) if 1 <= month <= 12 else None


@rule(MONTH_EN + r"\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?\b")
def _en_month_day(m: re.Match[str], today: date) -> Span:
    month, day = _en_month(m.group(1)), int(m.group(2))
    if m.group(3):
        return _date(int(m.group(3)), month, day)
    found = _latest_date(today, month, day)
    return None if found is None else _day(found)


@rule(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + MONTH_EN + r"(?:,?\s+(\d{4}))?\b")
def _en_day_month(m: re.Match[str], today: date) -> Span:
    day, month = int(m.group(1)), _en_month(m.group(2))
    if m.group(3):
        return _date(int(m.group(3)), month, day)
    found = _latest_date(today, month, day)
    return None if found is None else _day(found)


@rule(r"(?<![\d/])(\d{1,2})/(\d{1,2})(?![\d/])")
def _slash_month_day(m: re.Match[str], today: date) -> Span:
    found = _latest_date(today, int(m.group(1)), int(m.group(2)))
    return None if found is None else _day(found)


# ------------------------------------------------------------------ Japanese relative forms
@rule(r"(先々週|先週|今週|来週)の?" + WEEKDAY_JA)
def _ja_week_weekday(m: re.Match[str], today: date) -> Span:
    back = {"先々週": 14, "先週": 7, "今週": 0, "来週": -7}[m.group(1)]
    monday = _week(today)[0] - timedelta(days=back)
    return _day(monday + timedelta(days=WEEKDAYS_JA.index(m.group(2))))


@rule(r"(?:この前の|前の|この間の)?" + WEEKDAY_JA)
def _ja_weekday(m: re.Match[str], today: date) -> Span:
    return _day(_latest_weekday(today, WEEKDAYS_JA.index(m.group(1))))


@rule(r"一昨日|おととい|おとつい")
def _ja_day_before(m: re.Match[str], today: date) -> Span:
    return _day(today - timedelta(days=2))


@rule(r"昨日|きのう|さくじつ")
def _ja_yesterday(m: re.Match[str], today: date) -> Span:
    return _day(today - timedelta(days=1))


@rule(r"今日|きょう|本日")
def _ja_today(m: re.Match[str], today: date) -> Span:
    return _day(today)


@rule(r"(?:過去|ここ|最近|この)\s*(\d+|[〇一二三四五六七八九十百]+)\s*(日間?|週間?)")
def _ja_past(m: re.Match[str], today: date) -> Span:
    return _past(m.group(2), _n(m), today)


@rule(r"(\d+|[〇一二三四五六七八九十百]+)\s*(日|週間|週|[かヶカヵケ箇]月|年)前")
def _ja_ago(m: re.Match[str], today: date) -> Span:
    return _ago(m.group(2), _n(m), today)


@rule(r"先々週")
def _ja_week_before_last(m: re.Match[str], today: date) -> Span:
    return _week(today - timedelta(days=14))


@rule(r"先週")
def _ja_last_week(m: re.Match[str], today: date) -> Span:
    return _week(today - timedelta(days=7))


@rule(r"今週")
def _ja_this_week(m: re.Match[str], today: date) -> Span:
    return _week(today)


@rule(r"先月")
def _ja_last_month(m: re.Match[str], today: date) -> Span:
    return _months_back(today, 1)


@rule(r"今月")
def _ja_this_month(m: re.Match[str], today: date) -> Span:
    return _months_back(today, 0)


@rule(r"一昨年")
def _ja_year_before_last(m: re.Match[str], today: date) -> Span:
    return date(today.year - 2, 1, 1), date(today.year - 1, 1, 1)


@rule(r"去年|昨年")
def _ja_last_year(m: re.Match[str], today: date) -> Span:
    return date(today.year - 1, 1, 1), date(today.year, 1, 1)


@rule(r"今年")
def _ja_this_year(m: re.Match[str], today: date) -> Span:
    return date(today.year, 1, 1), date(today.year + 1, 1, 1)


@rule(r"(\d{1,2})\s*月(?!\s*\d)")
def _ja_month(m: re.Match[str], today: date) -> Span:
    month = int(m.group(1))
    return _latest_month(today, month) if 1 <= month <= 12 else None


# ------------------------------------------------------------------ English relative forms
@rule(r"\b(?:the\s+)?day\s+before\s+yesterday\b")
def _en_day_before(m: re.Match[str], today: date) -> Span:
    return _day(today - timedelta(days=2))


@rule(r"\byesterday\b")
def _en_yesterday(m: re.Match[str], today: date) -> Span:
    return _day(today - timedelta(days=1))


@rule(r"\b(?:today|tonight|this\s+morning|this\s+afternoon|this\s+evening)\b")
def _en_today(m: re.Match[str], today: date) -> Span:
    return _day(today)


@rule(r"\b" + NUM + r"\s+(days?|weeks?|months?|years?)\s+ago\b")
def _en_ago(m: re.Match[str], today: date) -> Span:
    return _ago(m.group(2), _n(m), today)


@rule(r"\b(?:in\s+|over\s+|during\s+)?the\s+(?:last|past)\s+" + NUM + r"\s+(days?|weeks?)\b")
def _en_past(m: re.Match[str], today: date) -> Span:
    return _past(m.group(2), _n(m), today)


@rule(r"\b(?:on\s+)?(last|this|past)\s+" + WEEKDAY_EN + r"\b")
def _en_which_weekday(m: re.Match[str], today: date) -> Span:
    weekday = _en_weekday(m.group(2))
    if m.group(1).lower() == "this":
        return _day(_week(today)[0] + timedelta(days=weekday))
    return _day(_latest_weekday(today, weekday))


@rule(r"\bon\s+" + WEEKDAY_EN + r"\b|\b" + WEEKDAY_EN + r"\b")
def _en_weekday_bare(m: re.Match[str], today: date) -> Span:
    return _day(_latest_weekday(today, _en_weekday(m.group(1) or m.group(2))))


@rule(r"\b(?:in\s+)?(last|this)\s+(week|month|year)\b")
def _en_this_last(m: re.Match[str], today: date) -> Span:
    back = 1 if m.group(1).lower() == "last" else 0
    unit = m.group(2).lower()
    if unit == "week":
        return _week(today - timedelta(days=7 * back))
    if unit == "month":
        return _months_back(today, back)
    return date(today.year - back, 1, 1), date(today.year - back + 1, 1, 1)


@rule(r"\b(?:in\s+)?(?:the\s+)?week\s+before\s+last\b")
def _en_week_before_last(m: re.Match[str], today: date) -> Span:
    return _week(today - timedelta(days=14))


@rule(r"\b(?:in|during|last)\s+" + MONTH_EN + r"(?:\s+(\d{4}))?\b")
def _en_in_month(m: re.Match[str], today: date) -> Span:
    month = _en_month(m.group(1))
    if m.group(2):
        return _month(int(m.group(2)), month)
    return _latest_month(today, month)


def time_window(query: str, now: datetime | None = None) -> TimeWindow | None:
    """The span of time `query` names first, with the rest of the query; None if it
    names none (see the module docstring). `now`: an aware datetime (default: now in
    the server's local zone), whose zone the days are counted in."""
    now = now or datetime.now().astimezone()
    if now.tzinfo is None:
        raise ValueError("time_window needs an aware `now`")
    text = unicodedata.normalize("NFKC", query)
    today = now.date()
    best: tuple[int, int, tuple[date, date], re.Match[str]] | None = None
    for order, (pattern, make) in enumerate(_RULES):
        for match in pattern.finditer(text):
            span = make(match, today)
            if span is None:
                continue
            # the earliest expression in the query; at one place, the first rule (the
            # most specific); then stop looking at this rule
            if best is None or match.start() < best[3].start():
                best = (order, match.start(), span, match)
            break
    if best is None:
        return None
    span, match = best[2], best[3]
    zone = now.tzinfo
    start = datetime.combine(span[0], time(), zone).astimezone(UTC)
    end = datetime.combine(span[1], time(), zone).astimezone(UTC)
    rest = (text[: match.start()] + " " + text[match.end() :]).strip()
    rest = re.sub(r"\s+", " ", rest).strip(" ,、。?？")
    return TimeWindow(start=start, end=end, phrase=match.group(0).strip(), rest=rest)
