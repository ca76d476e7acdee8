"""Agent-mode state follows the data directory (issue 32): each instance has its own tmux
server, so two OpenCrabs on one machine never share panes; and the test run itself
never reaches the user's tmux servers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from opencrab.agentmode.instance import tmux_socket
from opencrab.agentmode.opening import open_runner
from opencrab.config import load_settings
from opencrab.store import Database


def test_the_test_run_has_a_tmux_folder_of_its_own() -> None:
    """`tmux -L opencrab` inside the tests is not the user's: TMUX_TMPDIR is the run's own
    folder, so no fixture can end the user's agent-mode panes (a session fixture did)."""
    folder = os.environ.get("TMUX_TMPDIR")
    assert folder is not None
    assert Path(folder).name.startswith("oc-tmux-")
    done = subprocess.run(
        ["tmux", "-L", "opencrab", "display-message", "-p", "#{socket_path}"],
        capture_output=True,
        text=True,
        check=False,
    )  # no server there: tmux names the socket it would use, and starts nothing
    assert folder in done.stderr + done.stdout


async def test_two_data_dirs_have_two_tmux_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENCRAB_AGENT_MODE__TMUX_SOCKET")  # the default, as a user has it
    runners = []
    for name in ("one", "two"):
        settings = load_settings(overrides={"data_dir": str(tmp_path / name)})
        db = Database(settings.database_url)
        db.upgrade()
        runners.append((open_runner(settings, db), db, settings))
    (first, db1, s1), (second, db2, _) = runners
    assert first.tmux.socket != second.tmux.socket
    assert (
        first.tmux.socket
        == tmux_socket(s1)
        == tmux_socket(load_settings(overrides={"data_dir": str(tmp_path / "one")}))
    )  # the same data dir: the same server after a restart
    assert first.tmux.socket.startswith("opencrab-")
    try:
        pane = await first.tmux.open_pane(["sleep", "600"], cwd=tmp_path, labels={"task": "t"})
        assert [p.pane_id for p in await first.tmux.list_panes()] == [pane.pane_id]
        assert await second.tmux.list_panes() == []  # the other instance sees none of them
    finally:
        await first.tmux.kill_server()
        await second.tmux.kill_server()
        db1.close()
        db2.close()


def test_an_instance_only_touches_its_own_session_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both instances keep their sessions in the seed's `~/.gwt/sessions`; each file is
    marked with its instance, and the other instance neither reads, indexes nor writes it."""
    from opencrab.agentmode.files import SessionFiles
    from opencrab.agentmode.model import dump_session
    from opencrab.agentmode.service import AgentModeService
    from opencrab.agentmode.validation import PlannedTask
    from opencrab.errors import NotFoundError
    from tests.agentmode.runner_support import make_repo, make_session

    shared = SessionFiles(tmp_path / "home" / ".gwt" / "sessions")
    services = []
    for name in ("one", "two"):
        settings = load_settings(overrides={"data_dir": str(tmp_path / name)})
        db = Database(settings.database_url)
        db.upgrade()
        services.append(AgentModeService(settings, db, shared))
    one, two = services
    repo = make_repo(tmp_path / "repo")
    session_id = make_session(one, repo, [PlannedTask("task-001", "a", "")])
    path = shared.path_for(session_id)
    text = path.read_bytes()
    assert one.get(session_id).opencrab_instance == one.instance != two.instance

    with pytest.raises(NotFoundError, match="another OpenCrab instance"):
        two.get(session_id)
    assert two.reindex().sessions == 0
    assert two.list() == []
    assert path.read_bytes() == text  # untouched
    assert one.reindex().sessions == 1
    assert [row.id for row in one.list()] == [session_id]
    unmarked = one.get(session_id).model_copy(update={"opencrab_instance": None})
    assert "opencrab_instance" not in dump_session(unmarked)  # the seed's format exactly
    for service in services:
        service.db.close()
