"""Per-agent figures read across aggregates: today's spend, counts, rated calls.

Read-only: what the budget check, the agent overview and skill effectiveness need from
`llm_usage_metrics`, `sessions` / `agent_sessions` and `memory_curated`. Each of those
tables is written by its own repository; these are grouped reads over them, a fixed
number of queries however many agents there are.

Example:
    with db.read() as conn:
        spent_since(conn, agent_id, midnight)          # 0.0123
        spent_by_agent(conn, midnight, None)           # {agent id: USD, ...}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.repositories.metrics import midnight_key
from opencrab.store.tables import (
    agent_sessions,
    llm_usage_daily,
    llm_usage_metrics,
    memory_curated,
    memory_sessions,
    sessions,
)


@dataclass(frozen=True)
class RatedCall:
    """An LLM call's rating (evaluate_response): quality 0–1 and task success, if given."""

    id: str
    quality_score: float
    task_success: bool | None


def _only(column: Any, ids: Sequence[str] | None) -> Any:
    return sa.true() if ids is None else column.in_(ids)


def spent_since(conn: Connection, agent_id: str, since: datetime) -> float:
    """USD the agent's LLM calls cost since `since`."""
    return spent_by_agent(conn, since, [str(agent_id)]).get(str(agent_id), 0.0)


def spent_by_agent(
    conn: Connection, since: datetime, agent_ids: Sequence[str] | None
) -> dict[str, float]:
    """USD spent since `since` by agent (these agents, or all): one grouped query, over
    the daily rollup `llm_usage_daily` when `since` is a UTC midnight (its sums equal the
    calls': store/repositories/metrics.py writes both in one transaction)."""
    day = midnight_key(since)
    if day is not None:
        d = llm_usage_daily.c
        agent, cost, after = d.agent_id, d.cost_usd, d.day >= day
    else:
        m = llm_usage_metrics.c
        agent, cost, after = m.agent_id, m.estimated_cost_usd, m.timestamp >= since
    query = (
        sa.select(agent, sa.func.sum(cost)).where(after, _only(agent, agent_ids)).group_by(agent)
    )
    return {str(a): float(c or 0.0) for a, c in conn.execute(query)}


def memory_counts(conn: Connection, agent_ids: Sequence[str] | None) -> dict[str, int]:
    """Curated memories by agent (these agents, or all): one grouped query."""
    column = memory_curated.c.agent_id
    query = sa.select(column, sa.func.count()).where(_only(column, agent_ids)).group_by(column)
    return {str(agent): int(n) for agent, n in conn.execute(query)}


def session_counts(conn: Connection, agent_ids: Sequence[str] | None) -> dict[str, int]:
    """Sessions each agent is in: its chats and tickets, and the discussions it joined."""
    own = sa.select(sessions.c.agent_id.label("agent_id"), sessions.c.id.label("session_id")).where(
        sessions.c.agent_id.is_not(None), _only(sessions.c.agent_id, agent_ids)
    )
    joined = sa.select(agent_sessions.c.agent_id, agent_sessions.c.session_id).where(
        _only(agent_sessions.c.agent_id, agent_ids)
    )
    both = sa.union(own, joined).subquery()  # UNION: a session counted once per agent
    query = sa.select(both.c.agent_id, sa.func.count()).group_by(both.c.agent_id)
    return {str(agent): int(n) for agent, n in conn.execute(query)}


def failing_agents(conn: Connection, since: datetime, agent_ids: Sequence[str] | None) -> set[str]:
    """The agents whose latest turn since `since` ended in an error: their newest error
    line (a system line with an `error`, recorded when a turn fails) is newer than their
    newest speech."""
    m = memory_sessions.c
    failed = sa.and_(m.log_type == "system", m.metadata_json["error"].as_string().is_not(None))
    last_error = sa.func.max(sa.case((failed, m.id)))
    last_speech = sa.func.max(sa.case((m.log_type == "speech", m.id)))
    query = (
        sa.select(m.agent_id, last_error, last_speech)
        .where(m.created_at >= since, _only(m.agent_id, agent_ids))
        .group_by(m.agent_id)
    )
    return {
        str(agent)
        for agent, error, speech in conn.execute(query)
        if error is not None and (speech is None or error > speech)
    }


def rated_calls(conn: Connection, agent_id: str, metrics_ids: Sequence[str]) -> list[RatedCall]:
    """The agent's calls among `metrics_ids` that were rated (have a quality score)."""
    if not metrics_ids:
        return []
    u = llm_usage_metrics.c
    rows = conn.execute(
        sa.select(u.id, u.quality_score, u.task_success).where(
            u.agent_id == agent_id,
            u.id.in_(list(metrics_ids)),
            u.quality_score.is_not(None),
        )
    ).all()
    return [
        RatedCall(
            id=str(r.id),
            quality_score=float(r.quality_score),
            task_success=None if r.task_success is None else bool(r.task_success),
        )
        for r in rows
    ]
