"""An agent-mode session is watched under its lease (`agent-mode:<id>`): started through
the REST API of one `opencrab up`, it is watched there while an `opencrab worker` on the
same data directory leaves it alone; after `kill -9` of the server the worker takes the
lease over, finds the sub-agent's pane on the instance's tmux socket and sees the task
to its end — started once, delivered once, the session completed once."""

from __future__ import annotations

import subprocess
from pathlib import Path

from opencrab.agentmode.model import SessionStatus, TaskStatus
from opencrab.agentmode.runstate import RunFiles
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import load_settings
from opencrab.store import Database
from opencrab.store.leases import LeaseStore, agent_mode_key
from tests.agentmode.runner_support import make_repo, make_session, write_scripts
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab, wait_for


def test_a_worker_watches_an_agent_mode_session_on_after_its_server_was_killed(
    data_dir: Path, tmp_path: Path, fake_llm_server: FakeLlmServer, tmux_socket: str
) -> None:
    data = data_dir / "shared"
    sessions = tmp_path / "sessions"
    env = {
        "OPENCRAB_DATABASE__LEASE_TTL_SECS": "3",
        "OPENCRAB_AGENT_MODE__SESSIONS_DIR": str(sessions),
        "OPENCRAB_AGENT_MODE__TMUX_SOCKET": tmux_socket,  # the test's own tmux server
    }
    started, gate = tmp_path / "started", tmp_path / "gate"
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [
                {"write": str(started), "content": "up"},
                {"wait_for": str(gate)},  # runs on until the server is gone
                {"write": "feature.py", "content": "print('done')\n"},
            ]
        },
    )
    repo = make_repo(tmp_path / "repo")
    server = ServedOpenCrab(data, llm=fake_llm_server, env=env)
    worker = ServedOpenCrab(data, llm=fake_llm_server, env=env, worker=True)
    db: Database | None = None
    try:
        server.start()
        worker.start()
        settings = load_settings(
            overrides={"data_dir": str(data), "agent_mode": {"sessions_dir": str(sessions)}}
        )
        db = Database(settings.database_url)
        service = AgentModeService.open(settings, db)
        session_id = make_session(service, repo, [PlannedTask("task-001", "feature", "")])
        with server.client() as client:
            begun = client.post(
                f"/api/agent-mode/sessions/{session_id}/start",
                json={"cli": "other", "command": command},
            )
            assert begun.status_code == 200, begun.text
        lease = LeaseStore(db).get(agent_mode_key(session_id))
        assert lease is not None
        assert lease.owner.split(":")[1] == str(server.pid)  # the server watches it

        wait_for("the sub-agent to start", started.exists)
        wait_for(  # and the server to have recorded it (the launch itself is not the test)
            "the server to record the sub-agent",
            lambda: service.get(session_id).tasks[0].sub_agent is not None,
        )
        server.kill()  # no shutdown: the pane lives on in the instance's tmux server
        gate.touch()
        wait_for(
            "the worker to see the session to its end",
            lambda: service.get(session_id).status is SessionStatus.COMPLETED,
            secs=120,
        )
        wait_for(
            "the worker to let go of the session's lease",
            lambda: LeaseStore(db).get(agent_mode_key(session_id)) is None,
        )
    finally:
        server.stop()
        worker.stop()

    try:
        session = service.get(session_id)
        (task,) = session.tasks
        assert task.status is TaskStatus.COMPLETED
        assert task.sub_agent is not None
        assert task.sub_agent.id == "agent-001"  # one sub-agent: it was started once
        said = [m.content for m in session.conversation.messages]
        assert sum(text.startswith("Started with") for text in said) == 1
        assert said.count("Every task completed.") == 1
        state = RunFiles(data / "agent-mode").load(session_id)
        assert state is not None
        outcome = state.outcomes["task-001"]
        assert outcome.files_changed == 1  # delivered by the worker: committed, diffed
        commits = subprocess.run(
            ["git", "rev-list", "--count", f"main..{outcome.branch}"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
        assert commits.stdout.strip() == "1"  # one delivery, one commit
    finally:
        db.close()
