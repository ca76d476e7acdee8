"""Column types shared by every table, portable between SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """The storage form: fixed-width RFC 3339 UTC, so text order is time order.

    Example: `2024-01-15T10:30:00.000000Z`. A time that carries nanoseconds (an AgentEvent's
    `opencrab.events.Timestamp`) gets their three digits too: `…00.000000789Z`.
    """
    nanosecond: int = getattr(value, "nanosecond", 0)
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("timestamp must be timezone-aware")
    if offset:
        value = value.astimezone(UTC)
    # isoformat is several times faster than strftime; the offset is "+00:00" here
    text = value.isoformat(timespec="microseconds")[:-6]
    return f"{text}{nanosecond:03d}Z" if nanosecond else text + "Z"


def parse_timestamp(text: str) -> datetime:
    """Read a stored timestamp back as an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime: fixed-width text on SQLite, TIMESTAMPTZ elsewhere."""

    impl = sa.String(32)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.String(32))
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if dialect.name == "sqlite":
            return format_timestamp(value)
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return parse_timestamp(value)
        assert isinstance(value, datetime)
        return value.astimezone(UTC)


Uuid = sa.String(36)
"""UUIDs are stored as their canonical 36-character text on every dialect."""
