"""Small pieces of an imported line's rows: its timestamp, texts, counts and header.

Used by the importer's writer (importers/store.py) and the transcript search
(importers/search.py); none of them touches the database.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from opencrab.importers.common import Entry, parse_time
from opencrab.store.types import format_timestamp

MEMORY_CHARS = 2000  # tool input and output are clipped to this in memory logs
I32 = 2**31 - 1


class Clock:
    """Timestamps as (aware datetime, storage text); a line without a readable one takes
    the last line's."""

    def __init__(self) -> None:
        now = datetime.now(UTC)
        self.last = (now, format_timestamp(now))
        self.text: str | None = None

    def __call__(self, text: str) -> tuple[datetime, str]:
        if text != self.text:
            self.text = text
            # the usual shape, 2026-02-23T03:40:23.123Z, is UTC and needs no formatting
            # (not a week date nor a space before the time: those are formatted)
            if len(text) == 24 and text[23] == "Z" and text[4:20:3] == "--T::.":
                try:
                    self.last = (datetime.fromisoformat(text), f"{text[:23]}000Z")
                    return self.last
                except ValueError:
                    pass
            moment = parse_time(text)
            if moment is not None:
                self.last = (moment, format_timestamp(moment))
        return self.last


def text_row(session_id: str, entry: Entry, role: str, moment: datetime | str) -> tuple[Any, ...]:
    """An import_texts row (`imports_repo.TEXT_COLUMNS`): a user or assistant message's
    text, which the transcript search looks in (`moment`: a datetime, or in the driver's
    form for a `bound` insert)."""
    return (session_id, entry.line, entry.part, role, moment, entry.text)


def project(header: dict[str, Any]) -> str | None:
    """The working directory a session header names (Codex and Claude Code: `cwd`)."""
    cwd = header.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def count(tokens: int) -> int:
    """A token count as seed 000 allows it (an int, 0 to 2**31 - 1): a file may hold
    anything the scanner took for a number (a negative delta, `true`)."""
    value = int(tokens)
    return 0 if value < 0 else min(value, I32)


def clip(text: str) -> str:
    return text if len(text) <= MEMORY_CHARS else text[:MEMORY_CHARS] + "…"


def compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def header_kept(header: dict[str, Any]) -> dict[str, Any]:
    """The session header, without what only bloats it (instructions, big strings)."""
    return {
        k: v
        for k, v in header.items()
        if not (isinstance(v, str) and len(v) > 4000) and "instructions" not in k
    }
