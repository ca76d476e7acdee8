"""The memory-eval repository: the lines an eval asks about, and its stored runs
(`memory_eval_runs`, core/memory_eval.py).

Example:
    pool = eval_pool(db, agent_id, limit=3000)
    run = add_run(db, agent_id, questions=50, generator="builtin", legs={"lexical": {...}})
    runs(db, agent_id)   # newest first
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import sqlalchemy as sa
from pydantic import BaseModel

from opencrab.store import Database
from opencrab.store.repositories.memory import StoredLog, stored_log
from opencrab.store.tables import memory_eval_runs, memory_sessions

POOL_TYPES = ("speech", "inner_voice", "system")  # action lines are tool calls' JSON


class EvalRun(BaseModel):
    """One stored `opencrab memory eval` run."""

    id: str
    agent_id: str
    questions: int
    generator: str
    legs: dict[str, dict[str, Any]]
    created_at: datetime


def eval_pool(db: Database, agent_id: str, *, limit: int, min_chars: int = 8) -> list[StoredLog]:
    """The agent's latest `limit` lines an eval may ask about (said, thought or noted, at
    least `min_chars` characters; imported transcripts' lines included), oldest first."""
    m = memory_sessions.c
    query = (
        sa.select(memory_sessions)
        .where(
            m.agent_id == agent_id,
            m.log_type.in_(POOL_TYPES),
            sa.func.length(m.content) >= min_chars,
        )
        .order_by(m.id.desc())
        .limit(max(1, limit))
    )
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [stored_log(row) for row in reversed(rows)]


def add_run(
    db: Database, agent_id: str, *, questions: int, generator: str, legs: dict[str, Any]
) -> EvalRun:
    """Store one run's figures; returns it."""
    run = EvalRun(
        id=str(uuid4()),
        agent_id=agent_id,
        questions=questions,
        generator=generator,
        legs=legs,
        created_at=datetime.now(UTC),
    )
    with db.write() as conn:
        conn.execute(
            memory_eval_runs.insert().values(
                id=run.id,
                agent_id=agent_id,
                questions=questions,
                generator=generator,
                legs_json=legs,
                created_at=run.created_at,
            )
        )
    return run


def runs(db: Database, agent_id: str, *, limit: int = 50) -> list[EvalRun]:
    """The agent's latest `limit` runs, newest first."""
    e = memory_eval_runs.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(memory_eval_runs)
            .where(e.agent_id == agent_id)
            .order_by(e.created_at.desc(), e.id)
            .limit(max(1, limit))
        ).all()
    return [
        EvalRun(
            id=r.id,
            agent_id=r.agent_id,
            questions=r.questions,
            generator=r.generator,
            legs=r.legs_json or {},
            created_at=r.created_at,
        )
        for r in rows
    ]
