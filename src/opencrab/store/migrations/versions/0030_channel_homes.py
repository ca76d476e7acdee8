"""Heartbeat homes are (gateway, channel) pairs (issue 33, section 3).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-01

An agent's heartbeat home on a chat gateway was stored, for Discord alone, as
`{"gateway": "discord", "guild_id": G, "channel_id": C, …}`; it is now any gateway's
channel with the conversation whose session keeps it: `{"gateway": "discord",
"channel_id": C, "conversation": "G/C", …}` (the same session as before). Only
`agents.heartbeat_json` changes, row by row, on SQLite and PostgreSQL alike; a home
without a guild is left as it is. Downgrade writes Discord homes back in the old form.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

agents = sa.table("agents", sa.column("id", sa.String), sa.column("heartbeat_json", sa.JSON))


def upgrade() -> None:
    _rewrite(_as_channel)


def downgrade() -> None:
    _rewrite(_as_guild)


def _rewrite(change: Any) -> None:
    bind = op.get_bind()
    for agent_id, beat in bind.execute(sa.select(agents.c.id, agents.c.heartbeat_json)).all():
        home = beat.get("home") if isinstance(beat, dict) else None
        new = change(home) if isinstance(home, dict) else None
        if new is not None:
            bind.execute(
                agents.update()
                .where(agents.c.id == agent_id)
                .values(heartbeat_json={**beat, "home": new})
            )


def _as_channel(home: dict[str, Any]) -> dict[str, Any] | None:
    guild = home.get("guild_id")
    if guild is None or home.get("conversation"):
        return None
    rest = {key: value for key, value in home.items() if key != "guild_id"}
    return {**rest, "conversation": f"{guild}/{home.get('channel_id')}"}


def _as_guild(home: dict[str, Any]) -> dict[str, Any] | None:
    conversation = home.get("conversation")
    if home.get("gateway") != "discord" or not isinstance(conversation, str):
        return None
    guild, slash, channel = conversation.partition("/")
    if not slash or channel != home.get("channel_id"):
        return None
    rest = {key: value for key, value in home.items() if key != "conversation"}
    return {**rest, "guild_id": guild}
