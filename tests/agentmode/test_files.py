"""Session files: atomic, private, validated writes; corrupt files moved aside and reported."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import pytest

from opencrab.agentmode.files import SessionFileCorrupt, SessionFiles
from opencrab.agentmode.model import AgentSession, load_session_json
from opencrab.config import load_settings
from opencrab.errors import NotFoundError, PlanError, ValidationError

SEED_EXAMPLE = Path(__file__).parents[1] / "fixtures" / "seed004" / "session.json"


def seed_session() -> AgentSession:
    data = json.loads(SEED_EXAMPLE.read_text(encoding="utf-8"))
    data["id"] = str(uuid.uuid4())
    return AgentSession.model_validate(data)


def test_the_default_directory_is_gwt_sessions_under_home(home: Path) -> None:
    assert load_settings().agent_mode.sessions_path == home / ".gwt" / "sessions"


def test_save_writes_the_seed_format_privately_and_load_reads_it(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path / "sessions")
    session = seed_session()
    path = files.save(session)
    assert path == tmp_path / "sessions" / f"{session.id}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["tasks"][0]["sub_agent"]["agent_type"] == "ClaudeCode"
    assert files.load(session.id) == session
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_an_invalid_session_is_refused_and_the_stored_file_kept(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path)
    session = seed_session()
    files.save(session)
    before = files.path_for(session.id).read_bytes()
    session.tasks[0].dependencies = ["task-404"]  # type: ignore[list-item]
    with pytest.raises(PlanError, match="task-001 depends on task-404"):
        files.save(session)
    assert files.path_for(session.id).read_bytes() == before


def test_a_corrupt_file_is_moved_aside_and_reported(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path)
    good = seed_session()
    files.save(good)
    bad_id = str(uuid.uuid4())
    bad = tmp_path / f"{bad_id}.json"
    bad.write_text('{"id": "' + bad_id + '", "status": "Runnin', encoding="utf-8")
    with pytest.raises(SessionFileCorrupt) as caught:
        files.load(bad_id)
    moved = caught.value.problem.moved_to
    assert moved.name.startswith(f"{bad_id}.json.corrupt-")
    assert moved.read_text(encoding="utf-8").endswith('"Runnin')  # kept, not dropped
    assert str(moved) in str(caught.value)
    assert not bad.exists()
    with pytest.raises(NotFoundError):
        files.load(bad_id)
    sessions, corrupt = files.scan()
    assert [s.id for s in sessions] == [good.id]
    assert corrupt == []  # the moved file is not read again


def test_scan_reports_every_corrupt_file_beside_the_good_ones(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path)
    good = seed_session()
    files.save(good)
    wrong = seed_session()
    other_id = str(uuid.uuid4())
    (tmp_path / f"{other_id}.json").write_text(wrong.model_dump_json(), encoding="utf-8")
    shape_id = str(uuid.uuid4())
    (tmp_path / f"{shape_id}.json").write_text('{"id": 3}', encoding="utf-8")
    (tmp_path / "notes.json").write_text("not a session", encoding="utf-8")
    sessions, corrupt = files.scan()
    assert [s.id for s in sessions] == [good.id]
    reasons = {c.path.stem: c.reason for c in corrupt}
    assert reasons[other_id] == f"it holds session {wrong.id!r}, not {other_id!r}"
    assert "id" in reasons[shape_id]
    assert (tmp_path / "notes.json").exists()  # not a session file: left alone


def test_ids_that_are_not_uuids_never_name_a_file(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path)
    with pytest.raises(ValidationError, match="not a UUID"):
        files.load("../../etc/passwd")


def test_a_rewrite_replaces_the_file_whole(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path)
    session = seed_session()
    files.save(session)
    session.tasks[0].name = "別の名前"
    files.save(session)
    assert load_session_json(files.path_for(session.id).read_bytes()).tasks[0].name == "別の名前"
