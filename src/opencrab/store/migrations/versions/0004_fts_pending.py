"""Memory search index: log lines are queued on write and indexed in batches.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

FTS5 writes a new index segment for every transaction that inserts into it; indexing
each log line as it is written made that the largest single cost of an agent's step.
Now an insert only queues the row id in `memory_sessions_fts_pending`; the queue is
indexed in one batch before a search reads the index (and whenever a caller asks, see
`opencrab.store.dialects.sqlite.fts_catch_up`). Deleting or updating a line that is
still queued leaves the index alone: it never held that row.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = "content, agent_id, session_id, log_type"
OLD = "old.content, old.agent_id, old.session_id, old.log_type"
NEW = "new.content, new.agent_id, new.session_id, new.log_type"
QUEUED = "SELECT 1 FROM memory_sessions_fts_pending WHERE id = old.id"

UPGRADE = (
    "CREATE TABLE memory_sessions_fts_pending (id INTEGER PRIMARY KEY)",
    "DROP TRIGGER memory_sessions_fts_insert",
    "DROP TRIGGER memory_sessions_fts_delete",
    "DROP TRIGGER memory_sessions_fts_update",
    """CREATE TRIGGER memory_sessions_fts_insert AFTER INSERT ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts_pending(id) VALUES (new.id);
    END""",
    f"""CREATE TRIGGER memory_sessions_fts_delete AFTER DELETE ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, {COLUMNS})
        SELECT 'delete', old.id, {OLD} WHERE NOT EXISTS ({QUEUED});
        DELETE FROM memory_sessions_fts_pending WHERE id = old.id;
    END""",
    f"""CREATE TRIGGER memory_sessions_fts_update AFTER UPDATE ON memory_sessions
    WHEN NOT EXISTS ({QUEUED}) BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, {COLUMNS})
        VALUES ('delete', old.id, {OLD});
        INSERT INTO memory_sessions_fts(rowid, {COLUMNS}) VALUES (new.id, {NEW});
    END""",
)

DOWNGRADE = (
    # index what is queued, then go back to indexing on every insert
    f"""INSERT INTO memory_sessions_fts(rowid, {COLUMNS})
        SELECT m.id, m.content, m.agent_id, m.session_id, m.log_type
        FROM memory_sessions_fts_pending AS p JOIN memory_sessions AS m ON m.id = p.id""",
    "DROP TRIGGER memory_sessions_fts_insert",
    "DROP TRIGGER memory_sessions_fts_delete",
    "DROP TRIGGER memory_sessions_fts_update",
    "DROP TABLE memory_sessions_fts_pending",
    f"""CREATE TRIGGER memory_sessions_fts_insert AFTER INSERT ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(rowid, {COLUMNS}) VALUES (new.id, {NEW});
    END""",
    f"""CREATE TRIGGER memory_sessions_fts_delete AFTER DELETE ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, {COLUMNS})
        VALUES ('delete', old.id, {OLD});
    END""",
    f"""CREATE TRIGGER memory_sessions_fts_update AFTER UPDATE ON memory_sessions BEGIN
        INSERT INTO memory_sessions_fts(memory_sessions_fts, rowid, {COLUMNS})
        VALUES ('delete', old.id, {OLD});
        INSERT INTO memory_sessions_fts(rowid, {COLUMNS}) VALUES (new.id, {NEW});
    END""",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in DOWNGRADE:
            op.execute(statement)
