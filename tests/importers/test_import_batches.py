"""`Importer.run` stores many files in few transactions: each file whole, progress told
per file in order, and a file reached by two paths imported once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.importers.store import LOOKUP_FILES, FileResult, Importer
from opencrab.store import Database
from opencrab.store.tables import events, import_sessions
from tests.fakes.corpora import CODEX_CORPUS


def copied(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "sessions"
    shutil.copytree(CODEX_CORPUS, folder)
    return sorted(folder.rglob("rollout-*.jsonl"))


def test_many_files_are_written_in_one_transaction(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    files = copied(tmp_path)
    writes: list[Any] = []

    def committed(conn: Any) -> None:
        if conn.get_execution_options().get("write"):
            writes.append(conn)

    told: list[tuple[str, str, int]] = []

    def progress(result: FileResult, size: int) -> None:
        told.append((result.path, result.status, size))

    sa.event.listen(db.engine, "commit", committed)
    try:
        summary = Importer(db, "codex", agent_id=agent_id).run(
            [tmp_path / "sessions"], progress=progress
        )
    finally:
        sa.event.remove(db.engine, "commit", committed)
    assert len(writes) == 1  # six files, far under a batch's bytes: one commit
    assert told == [(str(p.resolve()), "new", p.stat().st_size) for p in files]
    data = summary.as_json()
    assert data["files_by_status"] == {"new": len(files)}
    with db.read() as conn:
        stored = conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
        sessions = conn.execute(sa.select(sa.func.count()).select_from(import_sessions))
        assert sessions.scalar_one() == len(files)
    assert stored == data["events"] > 0


def test_a_file_reached_by_two_paths_is_imported_once(
    db: Database, agent_id: str, tmp_path: Path
) -> None:
    files = copied(tmp_path)
    link = tmp_path / "again"
    link.symlink_to(tmp_path / "sessions", target_is_directory=True)
    summary = Importer(db, "codex", agent_id=agent_id).run([tmp_path / "sessions", link])
    statuses = [f.status for f in summary.files]
    assert statuses == ["new"] * len(files) + ["unchanged"] * len(files)
    assert [f.session_id for f in summary.files[: len(files)]] == [
        f.session_id for f in summary.files[len(files) :]
    ]
    with db.read() as conn:
        sessions = conn.execute(sa.select(sa.func.count()).select_from(import_sessions))
        assert sessions.scalar_one() == len(files)


def test_stored_sessions_are_looked_up_a_window_of_files_at_a_time(
    db: Database, tmp_path: Path
) -> None:
    def user_line(text: str) -> str:
        payload = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        line = {
            "timestamp": "2026-02-23T03:40:23.123Z",
            "type": "response_item",
            "payload": payload,
        }
        return json.dumps(line) + "\n"

    count = LOOKUP_FILES + 6
    paths = [tmp_path / f"rollout-2026-02-23T03-40-23-{n:03}.jsonl" for n in range(count)]
    for path in paths[: count - 3]:
        path.write_text(user_line(f"hello {path.name}"))
    Importer(db, "codex").run([tmp_path])
    for path in paths[:2]:  # two grow, three are new, the rest are as they were
        with path.open("a") as out:
            out.write(user_line("again"))
    for path in paths[count - 3 :]:
        path.write_text(user_line("new"))
    lookups: list[str] = []

    def executed(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM import_sessions" in statement:
            lookups.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", executed)
    try:
        summary = Importer(db, "codex").run([tmp_path])
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", executed)
    statuses = [f.status for f in summary.files]
    assert statuses == ["appended"] * 2 + ["unchanged"] * (count - 5) + ["new"] * 3
    assert summary.as_json()["events"] == 5
    assert len(lookups) == 2  # one query per LOOKUP_FILES files, not one per file


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("2026-02-23T03:40:23.123Z", "2026-02-23T03:40:23.123000Z"),
        ("2026-02-23 03:40:23.123Z", "2026-02-23T03:40:23.123000Z"),  # a space for the T
        ("2026-W08-1T03:40:23.123Z", "2026-02-16T03:40:23.123000Z"),  # an ISO week date
        ("2026-02-23T04:40:23.123+01:00", "2026-02-23T03:40:23.123000Z"),
    ],
)
def test_event_timestamps_are_stored_in_storage_form(
    db: Database, tmp_path: Path, written: str, stored: str
) -> None:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    line = {"timestamp": written, "type": "response_item", "payload": user}
    path = tmp_path / "rollout-2026-02-23T03-40-23-x.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert Importer(db, "codex").run([path]).as_json()["events"] == 1
    with db.read() as conn:
        assert conn.execute(sa.select(events.c.timestamp)).scalar_one() == stored
