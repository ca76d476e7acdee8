"""OpenCode's database as OpenCode 1.18 writes it: its schema (copied from the database
the real CLI wrote, tests/fixtures/opencode/schema.sql), in WAL mode, a project and
sessions, and messages whose `data` is the JSON OpenCode stores (or any text given)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).parents[1] / "fixtures" / "opencode" / "schema.sql"
START_MS = 1796163238079  # 2026-12-01T22:13:58.079Z, as the real run recorded it


def tokens(
    input: Any, output: Any, *, reasoning: Any = 0, read: Any = 0, write: Any = 0
) -> dict[str, Any]:
    """An assistant message's tokens as OpenCode records them (input without the cache,
    output without the reasoning)."""
    return {
        "total": 0,  # OpenCode's own sum; the import does not read it
        "input": input,
        "output": output,
        "reasoning": reasoning,
        "cache": {"write": write, "read": read},
    }


def assistant(
    count: dict[str, Any] | None,
    *,
    created: int = START_MS + 1000,
    completed: int | None = START_MS + 2300,
    model: str = "gpt-4.1",
    provider: str = "opencrab",
    cost: Any = 0,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An assistant message's data (a finished one unless `completed` is None)."""
    times: dict[str, int] = {"created": created}
    if completed is not None:
        times["completed"] = completed
    data: dict[str, Any] = {
        "parentID": "msg_user",
        "role": "assistant",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/work", "root": "/work"},
        "cost": cost,
        "modelID": model,
        "providerID": provider,
        "time": times,
    }
    if count is not None:
        data["tokens"] = count
    if error is not None:
        data["error"] = error
    else:
        data["finish"] = "stop"
    return data


def user(created: int = START_MS) -> dict[str, Any]:
    return {
        "role": "user",
        "time": {"created": created},
        "agent": "build",
        "model": {"providerID": "opencrab", "modelID": "gpt-4.1"},
    }


class OpenCodeStore:
    """An opencode.db being written, as by a running OpenCode: the connection stays open
    and never checkpoints, so the rows stay in `opencode.db-wal` until `close`."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        self.conn.executescript(SCHEMA.read_text())
        self.conn.execute(
            "INSERT INTO project (id, worktree, time_created, time_updated, sandboxes)"
            " VALUES ('global', '/', ?, ?, '[]')",
            (START_MS, START_MS),
        )
        self.order = 0

    def session(self, session_id: str) -> str:
        self.conn.execute(
            "INSERT INTO session (id, project_id, slug, directory, title, version,"
            " time_created, time_updated) VALUES (?, 'global', 'lucky-squid', '/work',"
            " 'New session', '1.18.33', ?, ?)",
            (session_id, START_MS, START_MS),
        )
        return session_id

    def message(self, session_id: str, message_id: Any, data: dict[str, Any] | str | bytes) -> None:
        """Add a message (a dict is stored as OpenCode's JSON, other data as it is)."""
        self.order += 1
        stored = json.dumps(data, separators=(",", ":")) if isinstance(data, dict) else data
        self.conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data)"
            " VALUES (?, ?, ?, ?, ?)",
            (message_id, session_id, START_MS + self.order, START_MS + self.order, stored),
        )

    def close(self) -> None:
        self.conn.close()
