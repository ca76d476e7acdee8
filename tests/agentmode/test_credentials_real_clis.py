"""The real Claude Code and Codex log in the way a user sets OpenCrab up: a key entered
through the LLM settings API (the dashboard's call) or only in the config file reaches
the fake model's auth header from inside the pane, and never the session's files; the
"use this custom API key?" question a key in the CLI's environment causes shows as
WaitingInput, and `answer 1` picks its first choice (Yes)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from opencrab.agentmode.model import SubAgentStatus, TaskStatus
from opencrab.agentmode.opening import open_runner
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings, load_settings
from opencrab.errors import ValidationError
from opencrab.llm.router import LlmRouter
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.agentmode.runner_support import (
    CLAUDE,
    CODEX,
    OFFLINE,
    RealCli,
    make_repo,
    make_runner,
    make_session,
    until,
)
from tests.fakes.coding_models import ScriptedModel, Text
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.local import LocalClient

PLAN = {"tasks": [{"id": "task-001", "name": "Say hello", "description": "Just say hello."}]}
PROVIDER = {"ClaudeCode": "anthropic", "Codex": "openai"}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCrab's own proxy settings, which a sub-agent gets: anything a CLI tries to
    reach beyond the fake model goes to a closed port."""
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def client(settings: Settings, db: Database, offline: None) -> Iterator[TestClient]:
    scripted = ScriptedProvider("openai")
    scripted.then(json.dumps(PLAN))
    router = LlmRouter(settings)
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


def auth_of(server: FakeLlmServer, path: str) -> set[str]:
    """The key each model request to `path` carried (x-api-key or a bearer token)."""
    keys = set()
    for request in server.requests_to(path):
        if "x-api-key" in request.headers:
            keys.add(request.headers["x-api-key"])
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            keys.add(bearer[7:])
    return keys


def wait_for_run(client: TestClient, base: str) -> dict[str, Any]:
    """The session's run once its task has ended (Completed or Failed)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run: dict[str, Any] = client.get(f"{base}/run").json()
        if run["tasks"][0]["status"] in ("Completed", "Failed"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"the task did not end: {client.get(f'{base}/run').text}")


def files_holding(root: Path, secret: str) -> list[Path]:
    """Files under `root` that hold `secret`."""
    return [
        path for path in root.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()
    ]


@pytest.mark.parametrize("cli", [CLAUDE, CODEX], ids=lambda cli: cli.cli)
def test_a_key_entered_through_the_settings_api_reaches_the_real_cli(
    cli: RealCli,
    client: TestClient,
    settings: Settings,
    tmp_path: Path,
    fake_llm_server: FakeLlmServer,
) -> None:
    ScriptedModel([Text("Hello.")]).serve_anthropic(fake_llm_server).serve_responses(
        fake_llm_server
    )
    repo = make_repo(tmp_path / "repo")
    created = client.post(
        "/api/agent-mode/sessions", json={"repository": str(repo), "request": "Say hello"}
    )
    assert created.status_code == 201, created.text  # planned (by the scripted provider)
    base = f"/api/agent-mode/sessions/{created.json()['id']}"
    key = f"sk-{cli.cli}-entered-on-the-dashboard-7f3a9c"
    provider = PROVIDER[cli.agent_type]
    changed = client.patch(
        f"/api/llm/providers/{provider}",
        json={"apiKey": key, "baseUrl": f"{fake_llm_server.url}{cli.api_path}"},
    )
    assert changed.status_code == 200, changed.text

    started = client.post(f"{base}/start", json={"cli": cli.cli})
    assert started.status_code == 200, started.text
    run = wait_for_run(client, base)

    path = "/v1/messages" if cli.agent_type == "ClaudeCode" else "/v1/responses"
    assert auth_of(fake_llm_server, path) == {key}, run["tasks"][0]
    assert run["tasks"][0]["status"] == "Completed", run["tasks"][0]
    assert key not in json.dumps(run)  # the API shows no key
    assert not files_holding(settings.agent_mode.sessions_path, key)
    assert not [
        p for p in files_holding(settings.data_dir, key) if p.name != ".claude.json"
    ]  # Claude Code's own state keeps the approved key's last 20 characters only
    assert key not in (client.get(f"{base}/tasks/task-001/output").json()["text"])


async def test_a_key_only_in_the_config_file_reaches_the_real_claude_code(
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
    offline: None,
) -> None:
    ScriptedModel([Text("Hello from the config.")]).serve_anthropic(fake_llm_server)
    key = "sk-ant-only-in-the-config-file-41d2"
    config = tmp_path / "opencrab.toml"
    config.write_text(
        f'[llm.providers.anthropic]\napi_key = "{key}"\nbase_url = "{fake_llm_server.url}"\n',
        encoding="utf-8",
    )
    settings = load_settings(config)
    runner = open_runner(settings, db)  # as `opencrab agent-mode start` opens it
    runner.tmux = tmux_server
    repo = make_repo(tmp_path / "repo")
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "Say hello", "")])

    await runner.start(session_id, "claude")
    session = await runner.wait(session_id)
    await runner.close()

    assert auth_of(fake_llm_server, "/v1/messages") == {key}
    assert session.tasks[0].status is TaskStatus.COMPLETED, session.tasks[0].result


async def test_no_key_anywhere_is_refused_before_starting_saying_where_to_set_it(
    settings: Settings, db: Database, tmp_path: Path, tmux_server: TmuxServer
) -> None:
    runner = open_runner(settings, db)
    runner.tmux = tmux_server
    repo = make_repo(tmp_path / "repo")
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "Say hello", "")])

    with pytest.raises(ValidationError) as refused:
        await runner.start(session_id, "claude")

    message = str(refused.value)
    assert "ClaudeCode needs an API key for anthropic" in message
    assert "dashboard's LLM page" in message
    assert "[llm.providers.anthropic] api_key" in message
    assert runner.run_state(session_id) is None  # nothing started


async def test_the_custom_key_question_waits_for_input_and_answer_1_picks_yes(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux_server: TmuxServer,
    fake_llm_server: FakeLlmServer,
) -> None:
    ScriptedModel([Text("Used the key.")]).serve_anthropic(fake_llm_server)
    key = "sk-ant-in-the-environment-only-9b1e"
    unapproved = OFFLINE | {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": fake_llm_server.url}
    runner = make_runner(settings, db, tmp_path, tmux_server, extra_env=unapproved)
    runner.search = [Path(__file__).resolve().parents[2] / "clis" / "node_modules" / ".bin"]
    repo = make_repo(tmp_path / "repo")
    session_id = make_session(runner.service, repo, [PlannedTask("task-001", "Say hello", "")])
    await runner.start(session_id, "claude")

    def waiting() -> bool:
        session = runner.current(session_id)
        agent = session.tasks[0].sub_agent if session else None
        return agent is not None and agent.status is SubAgentStatus.WAITING_INPUT

    async def screen() -> str:
        return await runner.output(session_id, "task-001")

    await until(waiting, "the API key question as WaitingInput", 90, describe=lambda: "")
    state = runner.run_state(session_id)
    assert state is not None
    assert state.questions["task-001"] == "Do you want to use this API key?"
    assert "No (recommended)" in await screen()

    await runner.answer(session_id, "task-001", "1")
    session = await runner.wait(session_id)
    await runner.close()

    assert auth_of(fake_llm_server, "/v1/messages") == {key}  # it said Yes
    assert session.tasks[0].status is TaskStatus.COMPLETED, session.tasks[0].result
