"""What a search asks of a dialect: the query records every dialect module reads.

They live apart from the package's dispatch (`opencrab.store.dialects`), which imports
the dialect modules, so that no dialect module imports the package back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from opencrab.store.types import UtcDateTime

MIN_INDEXED_CHARS = 3
"""Terms this long are ranked (trigrams need three characters); shorter ones only filter."""


@dataclass(frozen=True)
class MemoryQuery:
    """What a memory search looks for: lines of `agent_id` containing every term (written
    at or after `since` and before `until`, when given: aware datetimes)."""

    agent_id: str
    terms: tuple[str, ...]
    limit: int
    session_id: str | None = None
    log_types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @property
    def ranked_terms(self) -> list[str]:
        """The terms that rank hits (bm25); with none, hits come newest first, score 0."""
        return [t for t in self.terms if len(t) >= MIN_INDEXED_CHARS]

    @property
    def short_terms(self) -> list[str]:
        """The terms too short for trigrams: they filter, with (I)LIKE."""
        return [t for t in self.terms if len(t) < MIN_INDEXED_CHARS]


def window_statement(sql: str, query: MemoryQuery, params: dict[str, Any]) -> Any:
    """`sql` as a statement whose :since/:until (the query's time window, when set) bind
    as stored timestamps; adds their values to `params`."""
    statement = sa.text(sql)
    for name in ("since", "until"):
        value = getattr(query, name)
        if value is not None:
            params[name] = value
            statement = statement.bindparams(sa.bindparam(name, type_=UtcDateTime()))
    return statement


@dataclass(frozen=True)
class TextQuery:
    """What a search of imported transcripts looks for: message texts holding every term."""

    terms: tuple[str, ...]
    limit: int
    offset: int = 0

    @property
    def ranked_terms(self) -> list[str]:
        """The terms the trigram index can look up (three characters or more)."""
        return [t for t in self.terms if len(t) >= MIN_INDEXED_CHARS]

    @property
    def short_terms(self) -> list[str]:
        """The terms too short for trigrams: they filter, with (I)LIKE."""
        return [t for t in self.terms if len(t) < MIN_INDEXED_CHARS]


def like_pattern(term: str) -> str:
    """A `%term%` pattern (escape character `\\`) matching `term` literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
