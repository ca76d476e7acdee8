"""Chat agents (`chat_agents`): the one writer of that table.

A row says which agent answers one conversation of a chat gateway, as its people chose
(Telegram's `/use <agent>`); a conversation without a row is answered by the gateway's
configured agent.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from opencrab.store.database import Database
from opencrab.store.tables import chat_agents


def load(db: Database, gateway: str) -> dict[str, str]:
    """Every conversation of `gateway` with a chosen agent: conversation -> agent id."""
    query = sa.select(chat_agents.c.conversation, chat_agents.c.agent_id).where(
        chat_agents.c.gateway == gateway
    )
    with db.read() as conn:
        return {str(conversation): str(agent) for conversation, agent in conn.execute(query)}


def save(db: Database, gateway: str, conversation: str, agent_id: str, *, by: str) -> None:
    """`agent_id` answers `conversation` of `gateway` from now on (the agent must exist)."""
    now = datetime.now(UTC)
    key = (chat_agents.c.gateway == gateway) & (chat_agents.c.conversation == conversation)
    values = {"agent_id": str(agent_id), "set_by": by[:200], "updated_at": now}
    with db.write() as conn:
        if conn.execute(chat_agents.update().where(key).values(**values)).rowcount == 0:
            conn.execute(
                chat_agents.insert().values(gateway=gateway, conversation=conversation, **values)
            )


def clear(db: Database, gateway: str, conversation: str) -> bool:
    """Forget the choice of `conversation`; whether there was one."""
    key = (chat_agents.c.gateway == gateway) & (chat_agents.c.conversation == conversation)
    with db.write() as conn:
        return bool(conn.execute(chat_agents.delete().where(key)).rowcount)
