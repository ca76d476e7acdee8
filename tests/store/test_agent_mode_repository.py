"""The agent-mode session index on both databases: put, get, list, replace_all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from opencrab.store import Database
from opencrab.store.repositories import agent_mode as repo
from opencrab.store.repositories.agent_mode import TASK_STATES, AgentModeSessionRow

T0 = datetime(2026, 1, 22, 10, 30, tzinfo=UTC)


def row(
    n: int, status: str = "Active", repo_path: str = "/r/a", **counts: int
) -> AgentModeSessionRow:
    return AgentModeSessionRow(
        id=f"00000000-0000-4000-8000-{n:012d}",
        repository_path=repo_path,
        status=status,
        title=f"request {n}",
        request=f"request {n}\nmore",
        file_path=f"/s/{n}.json",
        tasks_total=sum(counts.values()),
        task_counts={s: counts.get(s, 0) for s in TASK_STATES},
        created_at=T0,
        updated_at=T0 + timedelta(minutes=n),
    )


def test_put_get_list_and_overwrite(any_db: Database) -> None:
    with any_db.write() as conn:
        repo.put(conn, row(1, pending=2, running=1))
        repo.put(conn, row(2, "Paused", "/r/b", completed=3))
        repo.put(conn, row(3, "Completed", completed=1))
    with any_db.read() as conn:
        first = repo.get(conn, row(1).id)
        assert first == row(1, pending=2, running=1)
        assert [r.id for r in repo.list_sessions(conn)] == [row(3).id, row(2).id, row(1).id]
        assert [r.id for r in repo.list_sessions(conn, status="Paused")] == [row(2).id]
        assert [r.id for r in repo.list_sessions(conn, repository_path="/r/a", limit=1)] == [
            row(3).id
        ]
        assert repo.count(conn) == 3
        assert repo.get(conn, "00000000-0000-4000-8000-999999999999") is None
    with any_db.write() as conn:
        repo.put(conn, row(1, "Failed", failed=1, cancelled=2))
    with any_db.read() as conn:
        again = repo.get(conn, row(1).id)
        assert again is not None
        assert again.status == "Failed"
        assert again.task_counts["cancelled"] == 2
        assert again.tasks_total == 3


def test_replace_all_drops_rows_without_a_file(any_db: Database) -> None:
    with any_db.write() as conn:
        for n in (1, 2, 3):
            repo.put(conn, row(n))
    with any_db.write() as conn:
        assert repo.replace_all(conn, [row(2), row(4)]) == 2
    with any_db.read() as conn:
        assert sorted(r.id for r in repo.list_sessions(conn)) == [row(2).id, row(4).id]
    with any_db.write() as conn:
        repo.replace_all(conn, [])
        assert repo.delete(conn, row(2).id) is False
    with any_db.read() as conn:
        assert repo.count(conn) == 0
