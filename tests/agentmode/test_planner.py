"""The master agent plans through the router against a fake OpenAI server: a valid plan,
an invalid one corrected, three invalid ones falling back to one task, a Japanese request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opencrab.agentmode.model import MessageRole, SessionStatus, TaskStatus, WorktreeStrategy
from opencrab.agentmode.planner import parse_plan
from opencrab.agentmode.service import AgentModeService
from opencrab.config import load_settings
from opencrab.core.runtime import Runtime
from opencrab.store.repositories import metrics as metrics_repo
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.ports import closed_port

CHAT = "/v1/chat/completions"

GOOD_PLAN = {
    "tasks": [
        {
            "id": "task-001",
            "name": "JWT auth",
            "description": "Implement JWT issuing and checking.",
            "dependencies": [],
            "worktree_strategy": "New",
        },
        {
            "id": "task-002",
            "name": "Login page",
            "description": "A login form using the JWT endpoints.",
            "dependencies": ["task-001"],
            "worktree_strategy": "New",
        },
        {
            "id": "task-003",
            "name": "Auth tests",
            "description": "Tests for the JWT code.",
            "dependencies": ["task-001"],
            "worktree_strategy": "Shared",
        },
    ]
}
CYCLIC_PLAN = {
    "tasks": [
        {"id": "task-001", "name": "a", "description": "a", "dependencies": ["task-002"]},
        {"id": "task-002", "name": "b", "description": "b", "dependencies": ["task-001"]},
    ]
}


def text_reply(text: str) -> Reply:
    return Reply(json=completion({"content": text}))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
async def runtime(
    fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    closed = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", closed)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", closed)
    monkeypatch.setenv("OPENCRAB_AGENT_MODE__SESSIONS_DIR", str(tmp_path / "sessions"))
    async with Runtime.open(load_settings()) as rt:
        yield rt


def service_of(rt: Runtime) -> AgentModeService:
    return AgentModeService.open(rt.settings, rt.db)


def sent_messages(server: FakeLlmServer, n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.requests_to(CHAT)[n].json["messages"]
    return messages


async def test_a_valid_plan_becomes_pending_tasks_saved_and_indexed(
    runtime: Runtime, fake_llm_server: FakeLlmServer, repo: Path, tmp_path: Path
) -> None:
    fake_llm_server.reply(CHAT, text_reply("```json\n" + json.dumps(GOOD_PLAN) + "\n```"))
    service = service_of(runtime)
    session = await service.create_session(
        runtime.router, runtime.agents, repo, "Add authentication"
    )
    assert session.status is SessionStatus.ACTIVE
    assert [t.id for t in session.tasks] == ["task-001", "task-002", "task-003"]
    assert all(t.status is TaskStatus.PENDING for t in session.tasks)
    assert session.tasks[2].worktree_strategy is WorktreeStrategy.SHARED
    assert session.tasks[1].dependencies == ["task-001"]
    assert session.repository_path == repo.resolve()
    roles = [m.role for m in session.conversation.messages]
    assert roles == [MessageRole.SYSTEM, MessageRole.USER, MessageRole.ASSISTANT]
    assert len(fake_llm_server.requests_to(CHAT)) == 1
    sent = sent_messages(fake_llm_server, 0)
    assert sent[0]["role"] == "system"
    assert "master" in sent[0]["content"]  # the master agent's IDENTITY heads the prompt
    assert '"worktree_strategy"' in sent[0]["content"]  # the plan's schema
    assert sent[1] == {"role": "user", "content": "Add authentication"}
    file = tmp_path / "sessions" / f"{session.id}.json"
    assert json.loads(file.read_text(encoding="utf-8"))["tasks"][0]["status"] == "Pending"
    assert service.get(session.id) == session
    [row] = service.list()
    assert (row.id, row.status, row.title, row.tasks_total) == (
        session.id,
        "Active",
        "Add authentication",
        3,
    )
    assert row.task_counts["pending"] == 3
    assert runtime.router.metrics is not None
    await runtime.router.metrics.flush()
    master = runtime.agents.get("master")
    assert master.heartbeat.enabled is False  # created to plan, not to tick and spend
    with runtime.db.read() as conn:
        calls = metrics_repo.agent_calls(conn, master.id)
    assert [c.task_type for c in calls] == ["agent_mode_plan"]


async def test_an_invalid_plan_is_shown_its_problems_and_corrected(
    runtime: Runtime, fake_llm_server: FakeLlmServer, repo: Path
) -> None:
    fake_llm_server.reply(
        CHAT, text_reply(json.dumps(CYCLIC_PLAN)), text_reply(json.dumps(GOOD_PLAN))
    )
    session = await service_of(runtime).create_session(
        runtime.router, runtime.agents, repo, "Add authentication"
    )
    assert len(session.tasks) == 3
    second = sent_messages(fake_llm_server, 1)
    assert second[-2] == {"role": "assistant", "content": json.dumps(CYCLIC_PLAN)}
    assert second[-1]["role"] == "user"
    assert "dependency cycle: task-001 → task-002 → task-001" in second[-1]["content"]
    roles = [m.role for m in session.conversation.messages]
    assert roles == [
        MessageRole.SYSTEM,
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.SYSTEM,  # the correction
        MessageRole.ASSISTANT,
    ]


async def test_three_invalid_plans_fall_back_to_one_task(
    runtime: Runtime, fake_llm_server: FakeLlmServer, repo: Path
) -> None:
    missing = {"tasks": [{"id": "task-001", "name": "a", "description": "a",
                          "dependencies": ["task-404"]}]}  # fmt: skip
    fake_llm_server.reply(
        CHAT,
        text_reply("Sure! I will plan it."),
        text_reply(json.dumps(missing)),
        text_reply(json.dumps({"tasks": [{"id": "1", "name": "x", "description": "y"}]})),
    )
    request = "Refactor the parser\nand keep the public API."
    session = await service_of(runtime).create_session(
        runtime.router, runtime.agents, repo, request
    )
    assert len(fake_llm_server.requests_to(CHAT)) == 3
    [task] = session.tasks
    assert (task.id, task.name, task.description) == (
        "task-001",
        "Refactor the parser",
        request,
    )
    third = sent_messages(fake_llm_server, 2)
    assert (
        "task-001 depends on task-404, which is not a task of the session" in (third[-1]["content"])
    )
    assert "not one JSON object" in sent_messages(fake_llm_server, 1)[-1]["content"]
    last = session.conversation.messages[-1]
    assert last.role is MessageRole.SYSTEM
    assert "3 attempts" in last.content


async def test_a_japanese_request_with_a_japanese_master(
    runtime: Runtime, fake_llm_server: FakeLlmServer, repo: Path
) -> None:
    plan = {
        "tasks": [
            {"id": "task-001", "name": "JWT認証の実装", "description": "JWTを発行・検証する"},
            {"id": "task-002", "name": "ログイン画面", "description": "フォームを作る",
             "dependencies": ["task-001"]},
        ]
    }  # fmt: skip
    fake_llm_server.reply(CHAT, text_reply(json.dumps(plan, ensure_ascii=False)))
    from opencrab.core.agent import AgentCreate

    runtime.agents.create(AgentCreate(name="親方", language="ja"))
    session = await service_of(runtime).create_session(
        runtime.router, runtime.agents, repo, "認証機能を実装して", agent="親方"
    )
    assert [t.name for t in session.tasks] == ["JWT認証の実装", "ログイン画面"]
    system = sent_messages(fake_llm_server, 0)[0]["content"]
    assert "マスターエージェント" in system
    assert "親方" in system
    assert session.request() == "認証機能を実装して"
    [row] = service_of(runtime).list()
    assert row.title == "認証機能を実装して"


def test_parse_plan_names_each_problem() -> None:
    tasks, problems = parse_plan(json.dumps(GOOD_PLAN), max_tasks=2)
    assert tasks == []
    assert problems == ["the plan has 3 tasks; at most 2 are allowed"]
    _, problems = parse_plan('{"tasks": [{"id": "task-001"}]}', max_tasks=5)
    assert "tasks.0.name: Field required" in problems


async def test_a_directory_outside_git_is_refused_before_any_call(
    runtime: Runtime, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    from opencrab.errors import ValidationError

    with pytest.raises(ValidationError, match="not inside a git repository"):
        await service_of(runtime).create_session(runtime.router, runtime.agents, plain, "x")
    assert fake_llm_server.requests_to(CHAT) == []
