"""The agents aggregate's rows: `agents` with its `soul` and `identity` (seed 001/002).

Every function runs inside the caller's transaction (`db.read()` / `db.write()`), so a
caller composes several into one; values come back as typed rows, never SQLAlchemy rows.
The granted tools are in `repositories/tools.py`, skills in `repositories/skills.py`.

Example:
    with db.write() as conn:
        insert_agent(conn, AgentRow(id=..., name="aki", ...))
        save_soul(conn, agent_id, SoulRow(persona_name="aki"), now)
    with db.read() as conn:
        row = find_agent(conn, "aki")           # by id or by name; None when absent
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.prepared import Prepared
from opencrab.store.tables import agents, identity, soul


@dataclass(frozen=True)
class AgentRow:
    """One `agents` row; `llm_config` and `heartbeat` are their stored JSON (None: unset)."""

    id: str
    name: str
    description: str | None
    prompt: str
    language: str | None
    llm_config: dict[str, Any] | None
    heartbeat: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SoulRow:
    """An agent's `soul` row: the persona's name and its trait groups as stored JSON."""

    persona_name: str
    social_style: dict[str, Any] = field(default_factory=dict)
    personality: dict[str, Any] = field(default_factory=dict)
    thinking_style: dict[str, Any] = field(default_factory=dict)
    custom_traits: Any = None


@dataclass(frozen=True)
class IdentityRow:
    """An agent's `identity` row (`role` as stored)."""

    name: str
    role: str = "discussant"
    job_title: str | None = None
    organization: str | None = None
    image_url: str | None = None
    metadata: Any = None


@dataclass(frozen=True)
class AgentSummary:
    """(id, name, description) of an agent, for lists."""

    id: str
    name: str
    description: str | None


_UNSET: Any = object()


def _agent(row: Any) -> AgentRow:
    return AgentRow(
        id=str(row.id),
        name=row.name,
        description=row.description,
        prompt=row.prompt or "",
        language=row.language,
        llm_config=row.llm_config_json,
        heartbeat=row.heartbeat_json,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _soul(row: Any) -> SoulRow:
    return SoulRow(
        persona_name=row.persona_name,
        social_style=row.social_style_json or {},
        personality=row.personality_json or {},
        thinking_style=row.thinking_style_json or {},
        custom_traits=row.custom_traits_json,
    )


def _identity(row: Any) -> IdentityRow:
    return IdentityRow(
        name=row.name,
        role=row.role,
        job_title=row.job_title,
        organization=row.organization,
        image_url=row.image_url,
        metadata=row.metadata_json,
    )


# ------------------------------------------------------------------ reading
def find_agent(conn: Connection, name_or_id: str) -> AgentRow | None:
    """The agent whose id (a UUID) or else name this is; None when there is none."""
    key = str(name_or_id).strip()
    try:
        key = str(UUID(key))
    except ValueError:
        row = conn.execute(sa.select(agents).where(agents.c.name == key)).first()
    else:
        row = conn.execute(sa.select(agents).where(agents.c.id == key)).first()
    return None if row is None else _agent(row)


def all_agents(conn: Connection) -> list[AgentRow]:
    """Every agent, oldest first."""
    return [_agent(r) for r in conn.execute(sa.select(agents).order_by(agents.c.created_at))]


def agent_key(name_or_id: str) -> str | None:
    """The agent id `find_agent` looks up when `name_or_id` is a UUID, else None (a name)."""
    try:
        return str(UUID(str(name_or_id).strip()))
    except ValueError:
        return None


def queue_parts(conn: Connection, agent_id: str) -> None:
    """Send the reads of the agent's soul and identity ahead (Prepared.queue: they go
    with the transaction's next round trip, `soul_of` and `identity_of` take them)."""
    _SOUL.queue(conn, agent_id=agent_id)
    _IDENTITY.queue(conn, agent_id=agent_id)


def soul_of(conn: Connection, agent_id: str) -> SoulRow | None:
    """The agent's soul row, None when it has none (one prepared read)."""
    row = _SOUL.first(conn, agent_id=agent_id)
    return None if row is None else _soul(row)


def identity_of(conn: Connection, agent_id: str) -> IdentityRow | None:
    """The agent's identity row, None when it has none (one prepared read)."""
    row = _IDENTITY.first(conn, agent_id=agent_id)
    return None if row is None else _identity(row)


_SOUL = Prepared(sa.select(soul).where(soul.c.agent_id == sa.bindparam("agent_id")))
_IDENTITY = Prepared(sa.select(identity).where(identity.c.agent_id == sa.bindparam("agent_id")))


def all_souls(conn: Connection) -> dict[str, SoulRow]:
    """Every soul row by agent id: one query."""
    return {str(r.agent_id): _soul(r) for r in conn.execute(sa.select(soul))}


def all_identities(conn: Connection) -> dict[str, IdentityRow]:
    """Every identity row by agent id: one query."""
    return {str(r.agent_id): _identity(r) for r in conn.execute(sa.select(identity))}


def agent_summaries(conn: Connection) -> list[AgentSummary]:
    """(id, name, description) of every agent, oldest first: one indexed read."""
    return [AgentSummary(str(r[0]), r[1], r[2]) for r in _SUMMARIES.rows(conn)]


def agent_names(conn: Connection) -> dict[str, tuple[str, str | None]]:
    """Every agent's (name, own language or None) by id: one read."""
    return {str(r[0]): (r[1], r[2]) for r in _NAMES.rows(conn)}


def agent_id_named(conn: Connection, name: str) -> str | None:
    """The id of the agent with this exact name, None when no agent has it."""
    found = conn.execute(sa.select(agents.c.id).where(agents.c.name == name)).first()
    return None if found is None else str(found.id)


# ------------------------------------------------------------------ writing
def insert_agent(conn: Connection, row: AgentRow) -> None:
    """Store a new agent row (its soul and identity are saved separately)."""
    conn.execute(
        agents.insert().values(
            id=row.id,
            name=row.name,
            description=row.description,
            prompt=row.prompt,
            language=row.language,
            llm_config_json=row.llm_config,
            heartbeat_json=row.heartbeat,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
    )


def update_agent(
    conn: Connection,
    agent_id: str,
    *,
    updated_at: datetime,
    name: str = _UNSET,
    description: str | None = _UNSET,
    prompt: str = _UNSET,
    language: str | None = _UNSET,
    llm_config: dict[str, Any] = _UNSET,
    heartbeat: dict[str, Any] = _UNSET,
) -> int:
    """Change the given columns of an agent (and `updated_at`); returns rows matched (0/1)."""
    given = {
        "name": name,
        "description": description,
        "prompt": prompt,
        "language": language,
        "llm_config_json": llm_config,
        "heartbeat_json": heartbeat,
    }
    values = {k: v for k, v in given.items() if v is not _UNSET}
    done = conn.execute(
        agents.update().where(agents.c.id == str(agent_id)).values(updated_at=updated_at, **values)
    )
    return int(done.rowcount)


def delete_agent(conn: Connection, agent_id: str) -> None:
    """Delete the agent; its soul, identity, skills, grants, … go with it (cascades)."""
    conn.execute(agents.delete().where(agents.c.id == agent_id))


def save_soul(conn: Connection, agent_id: str, persona: SoulRow, now: datetime) -> None:
    """Write the agent's soul row (update it, or insert it when it has none)."""
    values = {
        "persona_name": persona.persona_name,
        "social_style_json": persona.social_style,
        "personality_json": persona.personality,
        "thinking_style_json": persona.thinking_style,
        "custom_traits_json": persona.custom_traits,
        "updated_at": now,
    }
    done = conn.execute(soul.update().where(soul.c.agent_id == agent_id).values(values))
    if done.rowcount == 0:
        conn.execute(soul.insert().values(agent_id=agent_id, **values))


def save_identity(conn: Connection, agent_id: str, who: IdentityRow, now: datetime) -> None:
    """Write the agent's identity row (update it, or insert it when it has none)."""
    values = {
        "name": who.name,
        "role": who.role,
        "job_title": who.job_title,
        "organization": who.organization,
        "image_url": who.image_url,
        "metadata_json": who.metadata,
        "updated_at": now,
    }
    done = conn.execute(identity.update().where(identity.c.agent_id == agent_id).values(values))
    if done.rowcount == 0:
        conn.execute(identity.insert().values(agent_id=agent_id, **values))


_SUMMARIES = Prepared(
    sa.select(agents.c.id, agents.c.name, agents.c.description).order_by(agents.c.created_at)
)
_NAMES = Prepared(sa.select(agents.c.id, agents.c.name, agents.c.language))
