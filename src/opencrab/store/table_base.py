"""What every table module shares: the one `metadata` (its naming convention) and the
column helpers. The tables themselves are in opencrab.store.tables (seeds 000-002: agents,
tools, tickets, sessions, persona and memory, metrics, events), store/tables_ops.py (the
operator's: tokens, budgets, LLM settings, MCP servers, schedules, the inbox) and
store/tables_imports.py (seeds 003 and 004: imported transcripts, agent mode); import
them from opencrab.store.tables, which re-exports every one.
"""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store.types import UtcDateTime, Uuid

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _agent_fk(*, primary_key: bool = False) -> sa.Column[str]:
    return sa.Column(
        "agent_id",
        Uuid,
        sa.ForeignKey("agents.id", ondelete="CASCADE"),
        primary_key=primary_key,
        nullable=False,
    )


def _created() -> sa.Column[object]:
    return sa.Column("created_at", UtcDateTime, nullable=False)


def _updated() -> sa.Column[object]:
    return sa.Column("updated_at", UtcDateTime, nullable=False)
