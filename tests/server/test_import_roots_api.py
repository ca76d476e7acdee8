"""`POST /api/imports` reads only under `[imports] roots` (issue 31, point 6): a path
elsewhere gets the answer a missing path gets, a symlink out of a root is not followed,
a planted line that is no transcript never comes back whole, and a job can be stopped."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.importers.sessions import session_lines
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.fakes.scripted_provider import ScriptedProvider
from tests.fakes.transcripts import copy_rollout, japanese_rollout
from tests.server.conftest import error_of
from tests.server.local import LocalClient

SECRET = "sk-planted-0c6f1d2e9b7a4f38"


@pytest.fixture
def root(settings: Settings, tmp_path: Path) -> Path:
    """The one import root of these tests (never the user's ~/.codex or ~/.claude)."""
    folder = tmp_path / "root"
    folder.mkdir()
    settings.imports.roots = [str(folder)]
    return folder


def finished(client: TestClient, job_id: str) -> dict[str, Any]:
    """The job once it has stopped (the import runs in a thread)."""
    while True:
        job: dict[str, Any] = client.get(f"/api/imports/jobs/{job_id}").json()
        if job["status"] not in ("running", "cancelling"):
            return job
        time.sleep(0.05)


def refused(client: TestClient, path: str) -> str:
    """The 400 message of importing `path` (and no job was started)."""
    return error_of(
        client.post("/api/imports", json={"path": path, "source": "codex"}), 400, "validation_error"
    )


def test_a_path_outside_the_roots_is_answered_as_a_missing_one(
    client: TestClient, root: Path, tmp_path: Path
) -> None:
    elsewhere = copy_rollout(tmp_path / "elsewhere")  # a real rollout, outside the root
    (root / "inside").mkdir()
    (root / "inside" / "out").symlink_to(elsewhere.parent, target_is_directory=True)
    (root / "inside" / "out-file.jsonl").symlink_to(elsewhere)
    (root / "inside" / "dangling").symlink_to(tmp_path / "nothing-here")
    answers = {
        path: refused(client, path)
        for path in [
            "/",
            "/etc",
            str(tmp_path),
            str(elsewhere.parent),
            str(elsewhere),
            str(root / ".." / "elsewhere"),
            str(root / "inside" / "out"),  # a symlink in the root to a folder outside
            str(root / "inside" / "out-file.jsonl"),  # …and to a file outside
            str(root / "inside" / "dangling"),
            str(tmp_path / "nowhere"),  # missing, outside
            str(root / "nowhere"),  # missing, inside
        ]
    }
    roots = f"([imports] roots: {root})"
    for path, message in answers.items():
        assert message == f"{path} is not a file or folder under the import roots {roots}"
    assert client.get("/api/imports/sessions").json() == []


def test_no_roots_means_no_imports_over_the_api(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    rollout = copy_rollout(tmp_path / "sessions")
    settings.imports.roots = []
    message = refused(client, str(rollout))
    assert message.endswith("([imports] roots is empty: imports over the API are off)")


def test_a_symlinked_file_found_in_a_root_is_not_read(
    client: TestClient, root: Path, tmp_path: Path
) -> None:
    outside = copy_rollout(tmp_path / "elsewhere")
    inside = copy_rollout(root / "sessions")
    link = root / "sessions" / "rollout-2026-01-01T00-00-00-link.jsonl"
    link.symlink_to(outside)
    started = client.post("/api/imports", json={"path": str(root), "source": "codex"})
    assert started.status_code == 202, started.text
    job = finished(client, started.json()["id"])
    assert job["status"] == "done", job
    assert [(p["file"], p["reason"]) for p in job["problemLines"]] == [
        (
            str(link),
            f"leads outside the import roots ([imports] roots: {root}); not imported",
        )
    ]
    sessions = client.get("/api/imports/sessions").json()
    assert [s["filePath"] for s in sessions] == [str(inside.resolve())]


def _planted(folder: Path, name: str) -> Path:
    """A JSON-lines file that is no transcript, holding a secret: an object, and a line
    that is no JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        '{"api_key": "' + SECRET + '", "note": "not a transcript"}\n' + f"password={SECRET}\n"
    )
    return path


@pytest.mark.parametrize(
    ("source", "name"),
    [("codex", "rollout-2026-01-01T00-00-00-planted.jsonl"), ("claude", "planted.jsonl")],
)
def test_a_planted_line_in_a_root_never_comes_back_whole(
    client: TestClient, db: Database, root: Path, source: str, name: str
) -> None:
    planted = _planted(root / "planted", name)
    started = client.post("/api/imports", json={"path": str(planted.parent), "source": source})
    assert started.status_code == 202, started.text
    job = finished(client, started.json()["id"])
    assert job["status"] == "done", job
    (session_id,) = job["sessionIds"]
    base = f"/api/imports/sessions/{session_id}"
    answers = [
        client.get(f"/api/imports/jobs/{job['id']}"),
        client.get("/api/imports/sessions"),
        client.get(base),
        client.get(base + "/messages"),
        client.get(base + "/messages", params={"includeRaw": "true"}),
        client.get("/api/imports/search", params={"q": SECRET}),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert SECRET not in answer.text, answer.request.url
    trace = client.get(f"/api/traces/{session_id}/events")  # meta lines make no events
    assert trace.status_code == 404
    assert SECRET not in trace.text
    (message,) = client.get(base + "/messages", params={"includeRaw": "true"}).json()
    assert message["metadata"] == {"event_kind": "unknown"}
    assert (
        message["raw"]["payload_sha256"]
        == hashlib.sha256(
            orjson.dumps(
                orjson.loads(planted.read_bytes().splitlines()[0]), option=orjson.OPT_SORT_KEYS
            )
        ).hexdigest()
    )
    assert "payload" not in message["raw"]
    # …nor is it kept: the stored lines hold the lines' SHA-256 in their place
    stored = session_lines(db, session_id)
    assert len(stored) == 2
    assert not any(SECRET.encode() in line for line in stored)
    problems = [p["reason"] for p in client.get(base).json()["problemLines"]]
    assert len(problems) == 2


@pytest.fixture
def pg_app(
    settings: Settings, pg_url: str, scripted: ScriptedProvider
) -> Iterator[tuple[TestClient, str]]:
    """The app over a PostgreSQL store (whose tables a test can lock)."""
    db = Database(pg_url)
    db.upgrade()
    router = LlmRouter(settings)
    router.register_provider(scripted)
    try:
        with LocalClient(create_app(settings, db, router=router)) as client:
            yield client, pg_url
    finally:
        db.close()


def test_an_import_job_can_be_cancelled_between_files(
    pg_app: tuple[TestClient, str], root: Path
) -> None:
    client, url = pg_app
    for n in range(3):
        japanese_rollout(root / "sessions" / str(n))
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # the job looks its files' sessions up before reading them: it waits here
            conn.exec_driver_sql("LOCK TABLE import_sessions IN ACCESS EXCLUSIVE MODE")
            started = client.post("/api/imports", json={"path": str(root), "source": "codex"})
            assert started.status_code == 202, started.text
            job_id = started.json()["id"]
            cancelling = client.post(f"/api/imports/jobs/{job_id}/cancel")
            assert cancelling.status_code == 200, cancelling.text
            assert cancelling.json()["status"] == "cancelling"
            again = client.post(f"/api/imports/jobs/{job_id}/cancel")
            assert again.json()["status"] in ("cancelling", "cancelled")
            conn.rollback()
    finally:
        engine.dispose()
    job = finished(client, job_id)
    assert job["status"] == "cancelled", job
    assert job["finishedAt"] is not None
    assert job["filesTotal"] == 3
    assert job["filesDone"] <= 1  # at most the file in hand when it was asked to stop
    sessions = client.get("/api/imports/sessions").json()
    assert len(sessions) == job["filesDone"]
    # a stopped job stays stopped; a finished one cannot be cancelled; another may start
    assert client.post(f"/api/imports/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    second = client.post("/api/imports", json={"path": str(root), "source": "codex"})
    assert second.status_code == 202, second.text
    done = finished(client, second.json()["id"])
    assert done["status"] == "done"
    assert len(client.get("/api/imports/sessions").json()) == 3
    message = error_of(client.post(f"/api/imports/jobs/{done['id']}/cancel"), 409, "conflict")
    assert message == f"import job {done['id']} has ended (done); nothing to stop"
    error_of(
        client.post("/api/imports/jobs/00000000-0000-4000-8000-000000000000/cancel"),
        404,
        "not_found",
    )
