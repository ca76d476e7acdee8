"""`POST /api/imports` (a background import of a path on the server), its job, and
`GET /api/imports/search` / `/costs` / the session list's new filters."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.store import Database
from tests.fakes.transcripts import JA_USER, copy_rollout, japanese_rollout, price_corpus_model
from tests.server.conftest import error_of, new_agent


@pytest.fixture(autouse=True)
def _roots(settings: Settings, tmp_path: Path) -> None:
    """Imports over the API may read the test's own folder ([imports] roots)."""
    settings.imports.roots = [str(tmp_path)]


def finished(client: TestClient, job_id: str) -> dict[str, Any]:
    """The job once it is no longer running (the import runs in a thread)."""
    while True:
        job: dict[str, Any] = client.get(f"/api/imports/jobs/{job_id}").json()
        if job["status"] not in ("running", "cancelling"):
            return job
        time.sleep(0.05)


def test_an_import_runs_in_the_background_and_reports_progress(
    client: TestClient, db: Database, tmp_path: Path
) -> None:
    agent = new_agent(client)
    price_corpus_model(db)
    ja = japanese_rollout(tmp_path / "corpus" / "ja")
    copy_rollout(tmp_path / "corpus" / "real")
    (tmp_path / "corpus" / "notes.txt").write_text("not a rollout")
    started = client.post(
        "/api/imports",
        json={"path": str(tmp_path / "corpus"), "source": "codex", "agent_id": "aki"},
    )
    assert started.status_code == 202, started.text
    job = started.json()
    assert job["source"] == "codex"
    assert job["agentId"] == agent["id"]
    done = finished(client, job["id"])
    assert done["filesTotal"] == 2
    assert done["status"] == "done", done
    assert done["filesDone"] == 2
    assert done["error"] is None
    assert done["finishedAt"] is not None
    sessions = client.get("/api/imports/sessions").json()
    assert sorted(done["sessionIds"]) == sorted(s["id"] for s in sessions)
    assert done["messages"] == sum(s["messages"] for s in sessions)
    assert done["costUsd"] > 0
    assert done["costUsd"] == pytest.approx(sum(s["costUsd"] for s in sessions))
    assert {s["agentId"] for s in sessions} == {agent["id"]}
    # the imported sessions are searchable, filterable and costed
    hits = client.get("/api/imports/search", params={"q": "東京の天気"}).json()
    assert [(h["line"], h["role"]) for h in hits] == [(ja.user_line, "user")]
    assert JA_USER in hits[0]["snippet"]
    project = sessions[0]["project"]
    assert project == "/redacted/path/ea96e59ed9"
    same = client.get("/api/imports/sessions", params={"project": project, "day": "2026-02-23"})
    assert same.headers["x-total-count"] == "2"
    costs = client.get("/api/imports/costs").json()
    assert {c["day"] for c in costs} == {"2026-02-23"}
    assert sum(c["costUsd"] for c in costs) == pytest.approx(done["costUsd"])
    # importing again finds nothing new
    again = finished(
        client,
        client.post("/api/imports", json={"path": str(ja.path), "source": "codex"}).json()["id"],
    )
    assert (again["filesTotal"], again["filesDone"], again["messages"]) == (1, 1, 0)


def test_a_path_that_cannot_be_imported_is_a_clear_400(
    client: TestClient, db: Database, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    message = error_of(
        client.post("/api/imports", json={"path": str(missing), "source": "codex"}),
        400,
        "validation_error",
    )
    assert message == (
        f"{missing} is not a file or folder under the import roots ([imports] roots: {tmp_path})"
    )
    relative = error_of(
        client.post("/api/imports", json={"path": "sessions", "source": "codex"}),
        400,
        "validation_error",
    )
    assert "not an absolute path" in relative
    empty = tmp_path / "empty"
    empty.mkdir()
    started = client.post("/api/imports", json={"path": str(empty), "source": "codex"})
    assert started.status_code == 202
    failed = finished(client, started.json()["id"])
    assert failed["status"] == "failed"
    assert failed["error"] == f"no codex transcripts found under {empty}"
    assert failed["filesTotal"] == 0
    if os.geteuid() != 0:  # root reads everything
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o000)
        try:
            assert "not readable" in error_of(
                client.post("/api/imports", json={"path": str(locked), "source": "codex"}),
                400,
                "validation_error",
            )
        finally:
            locked.chmod(0o700)
    error_of(
        client.post("/api/imports", json={"path": str(tmp_path), "source": "gemini"}),
        400,
        "validation_error",
    )
    error_of(
        client.post("/api/imports", json={"path": str(tmp_path), "source": "codex", "x": 1}),
        400,
        "validation_error",
    )
    error_of(client.get("/api/imports/jobs/00000000-0000-4000-8000-000000000000"), 404, "not_found")
    error_of(client.get("/api/imports/search", params={"q": ""}), 400, "validation_error")
    error_of(client.get("/api/imports/search", params={"q": "  "}), 400, "validation_error")
    nul = error_of(
        client.get("/api/imports/search", params={"q": "東京\x00天気"}), 400, "validation_error"
    )
    assert "NUL" in nul
    error_of(client.get("/api/imports/sessions", params={"day": "23/02"}), 400, "validation_error")
    assert client.get("/api/imports/sessions").json() == []


def test_one_import_runs_at_a_time(client: TestClient, db: Database, tmp_path: Path) -> None:
    ja = japanese_rollout(tmp_path / "ja")
    with db.write() as conn:  # the job's first write waits for this transaction
        first = client.post("/api/imports", json={"path": str(ja.path), "source": "codex"})
        assert first.status_code == 202
        message = error_of(
            client.post("/api/imports", json={"path": str(ja.path), "source": "codex"}),
            409,
            "conflict",
        )
        assert message.startswith(f"import job {first.json()['id']} is still running")
        conn.exec_driver_sql("SELECT 1")
    assert finished(client, first.json()["id"])["status"] == "done"
    again = client.post("/api/imports", json={"path": str(ja.path), "source": "codex"})
    assert again.status_code == 202
    assert finished(client, again.json()["id"])["status"] == "done"
