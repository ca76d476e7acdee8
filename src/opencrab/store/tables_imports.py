"""Seeds 003 and 004: imported coding-agent transcripts (sessions, chunks, problems, their
searchable texts) and agent mode's sessions. Import them from opencrab.store.tables.
"""

from __future__ import annotations

import sqlalchemy as sa

from opencrab.store.table_base import _created, _in, _updated, metadata
from opencrab.store.types import UtcDateTime, Uuid

__all__ = [
    "AGENT_MODE_SESSION_STATUSES",
    "IMPORT_SOURCES",
    "agent_mode_sessions",
    "import_chunks",
    "import_problems",
    "import_sessions",
    "import_texts",
]

# ------------------------------------------- seed 003: imported coding-agent transcripts
IMPORT_SOURCES = ("codex", "claude")

import_sessions = sa.Table(
    "import_sessions",
    metadata,
    sa.Column("id", Uuid, primary_key=True),  # also the trace id of its events
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("file_path", sa.Text, nullable=False),
    sa.Column("external_id", sa.String(200)),  # the session id the file gives itself
    sa.Column("agent_id", Uuid, sa.ForeignKey("agents.id", ondelete="SET NULL"), index=True),
    sa.Column("title", sa.Text),
    sa.Column("model", sa.String(200)),
    sa.Column("provider", sa.String(64)),
    sa.Column("started_at", UtcDateTime),
    sa.Column("ended_at", UtcDateTime),
    # what has been read: the next import starts after `lines` lines / `bytes` bytes
    sa.Column("lines", sa.Integer, nullable=False, server_default="0"),
    sa.Column("bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("prefix_sha256", sa.String(64), nullable=False),  # of those bytes
    sa.Column("file_size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("file_mtime", sa.Float),
    sa.Column("messages", sa.Integer, nullable=False, server_default="0"),
    sa.Column("problems", sa.Integer, nullable=False, server_default="0"),
    sa.Column("kinds_json", sa.JSON, nullable=False, server_default="{}"),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cached_input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("reasoning_output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("total_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("header_json", sa.JSON),
    sa.Column("last_event_id", Uuid),  # where the next import continues the chain
    sa.Column("last_generation_id", Uuid),  # what the next token_usage may hang off
    _created(),
    _updated(),
    sa.Column("project", sa.Text),  # the working directory the session header names
    # lines whose message text is in import_texts (the rest is indexed on first search)
    sa.Column("texts_indexed_lines", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("source", "file_path"),
    sa.CheckConstraint(_in("source", IMPORT_SOURCES), name="source"),
)

import_chunks = sa.Table(
    "import_chunks",
    metadata,
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("first_line", sa.Integer, primary_key=True),  # 1-based
    sa.Column("lines", sa.Integer, nullable=False),
    sa.Column("raw_bytes", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),  # the lines as read, zstd
)

import_problems = sa.Table(
    "import_problems",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("line", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Index(None, "session_id", "line"),
)

# ---------------------------------------------------------------- seed 004: agent mode
AGENT_MODE_SESSION_STATUSES = ("Active", "Paused", "Completed", "Failed")

agent_mode_sessions = sa.Table(
    "agent_mode_sessions",  # an index of the session files (the files are the truth)
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("repository_path", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("title", sa.Text, nullable=False),  # the request's first line, shortened
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("file_path", sa.Text, nullable=False),
    sa.Column("tasks_total", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_pending", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_ready", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_running", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_completed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tasks_cancelled", sa.Integer, nullable=False, server_default="0"),
    _created(),
    sa.Column("updated_at", UtcDateTime, nullable=False, index=True),
    sa.CheckConstraint(_in("status", AGENT_MODE_SESSION_STATUSES), name="status"),
)

# revision 0023: imported transcripts' message texts, searchable
import_texts = sa.Table(
    "import_texts",
    metadata,
    # the text of imported user and assistant messages, for full-text search (SQLite:
    # the FTS5 table import_texts_fts; PostgreSQL: a pg_trgm GIN index on `text`)
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id",
        Uuid,
        sa.ForeignKey("import_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("line", sa.Integer, nullable=False),  # 1-based, as the file has it
    sa.Column("part", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # user or assistant
    sa.Column("timestamp", UtcDateTime, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.UniqueConstraint("session_id", "line", "part"),
)
