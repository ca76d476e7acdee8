"""Shared pieces of the runner tests: a git repository, a planned session, scripts for
the scripted `other` sub-agent, a runner over real tmux, waiting for a state, and the
real coding CLIs (clis/node_modules) with the fake model server each one talks to."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opencrab.agentmode.clis import Endpoint
from opencrab.agentmode.files import SessionFiles
from opencrab.agentmode.model import (
    AgentSession,
    Conversation,
    MessageRole,
    SessionId,
    SessionStatus,
    utcnow,
)
from opencrab.agentmode.runner import AgentModeRunner
from opencrab.agentmode.service import AgentModeService, tasks_from_plan
from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.store import Database
from tests.fakes.coding_models import ScriptedModel, ToolCall
from tests.fakes.llm_server import FakeLlmServer

SCRIPTED = Path(__file__).parents[1] / "fakes" / "scripted_agent.py"
CLIS_BIN = Path(__file__).resolve().parents[2] / "clis" / "node_modules" / ".bin"
# Whatever a CLI might still try to reach beyond the fake model goes to a closed port.
OFFLINE = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


@dataclass(frozen=True)
class RealCli:
    """A real coding CLI as the runner tests drive it: its `--cli` name, the fake API it
    talks to, and the tool call with which its model runs a shell command."""

    cli: str  # the runner's name for it (claude, codex, gemini, opencode)
    agent_type: str  # its SubAgentType / Endpoint key
    importer: str  # the opencrab.importers source of its transcripts
    api_path: str  # "" (Anthropic, Gemini: the base URL) or "/v1" (OpenAI APIs)
    api_key: str
    model: str
    shell_tool: str  # the tool that runs a command, and its argument name
    shell_argument: str
    priced: bool  # whether its imported usage gets a cost (see CODEX)

    def run(self, command: str) -> ToolCall:
        """The model's call of its shell tool with `command`."""
        described = self.agent_type in ("ClaudeCode", "OpenCode")  # a required argument
        extra = {"description": "run it"} if described else {}
        return ToolCall(self.shell_tool, {self.shell_argument: command, **extra})

    def serve(self, model: ScriptedModel, server: FakeLlmServer) -> Endpoint:
        """Serve `model` in this CLI's wire format; the endpoint the CLI is given."""
        if self.agent_type == "ClaudeCode":
            model.serve_anthropic(server)
        elif self.agent_type == "Gemini":
            model.serve_gemini(server)
        elif self.agent_type == "OpenCode":
            model.serve_chat(server)
        else:
            model.serve_responses(server)
        return Endpoint(f"{server.url}{self.api_path}", self.api_key, self.model)


CLAUDE = RealCli(
    "claude", "ClaudeCode", "claude", "", "sk-ant-opencrab-test-0123456789",
    "claude-sonnet-4-5", "Bash", "command", True,
)  # fmt: skip
# Codex records the id of its model provider section, "opencrab" (clis.py), as the
# provider of each call: priced as the model itself (llm/pricing.py, rule 5).
CODEX = RealCli(
    "codex", "Codex", "codex", "/v1", "sk-opencrab-codex-test",
    "gpt-5.2-codex", "exec_command", "cmd", True,
)  # fmt: skip
# Gemini CLI keeps its chats under ~/.gemini/tmp: their usage is imported (provider
# google), the model one model_pricing prices.
GEMINI = RealCli(
    "gemini", "Gemini", "gemini", "", "gemini-opencrab-test-key",
    "gemini-3-pro", "run_shell_command", "command", True,
)  # fmt: skip
# OpenCode keeps its sessions in a SQLite database: their usage is imported (provider
# "opencrab", the section agent mode writes), a model model_pricing does not price and
# OpenCode gives no cost (its provider section names none).
OPENCODE = RealCli(
    "opencode", "OpenCode", "opencode", "/v1", "sk-opencrab-opencode-test",
    "gpt-4.1", "bash", "command", False,
)  # fmt: skip


def sh(cwd: Path, *args: str) -> str:
    """Run git in `cwd`; its stdout."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(root: Path) -> Path:
    """A git repository on `main` with one commit."""
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.email", "dev@example.com")
    sh(root, "config", "user.name", "Dev")
    (root / "app.py").write_text("print('hello')\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-qm", "start")
    return root


def make_session(service: AgentModeService, repo: Path, plan: Sequence[PlannedTask]) -> str:
    """A planned session (Active, all Pending) saved through the service."""
    now = utcnow()
    conversation = Conversation()
    conversation.add(MessageRole.USER, "build the app", now)
    session = AgentSession(
        id=SessionId(str(uuid.uuid4())),
        created_at=now,
        updated_at=now,
        status=SessionStatus.ACTIVE,
        repository_path=repo,
        conversation=conversation,
        tasks=tasks_from_plan(plan, now),
        worktrees=[],
    )
    service.save(session)
    return session.id


def write_scripts(folder: Path, scripts: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One script per task id in `folder`; the `other` command that runs them."""
    folder.mkdir(parents=True, exist_ok=True)
    for task_id, steps in scripts.items():
        (folder / f"{task_id}.json").write_text(json.dumps(steps), encoding="utf-8")
    return [sys.executable, str(SCRIPTED), str(folder)]


def make_runner(
    settings: Settings, db: Database, tmp_path: Path, tmux: TmuxServer, **options: Any
) -> AgentModeRunner:
    """A runner over the test's sessions dir, data dir and tmux server (fast polling)."""
    service = AgentModeService(settings, db, SessionFiles(tmp_path / "sessions"))
    return AgentModeRunner(
        service, tmux, data_dir=tmp_path / "data", poll_secs=0.05, search=(), **options
    )


def real_cli_runner(
    settings: Settings,
    db: Database,
    tmp_path: Path,
    tmux: TmuxServer,
    cli: RealCli,
    endpoint: Endpoint,
    offline: dict[str, str] = OFFLINE,
) -> AgentModeRunner:
    """A runner that starts `cli` from clis/node_modules against `endpoint`, offline
    (`offline`: the proxy settings every sub-agent gets)."""
    runner = make_runner(
        settings, db, tmp_path, tmux, endpoints={cli.agent_type: endpoint}, extra_env=offline
    )
    runner.search = [CLIS_BIN]
    return runner


async def until(
    probe: Callable[[], Any], what: str, timeout: float = 60.0, describe: Callable[[], str] = str
) -> Any:
    """Poll `probe` (a function or coroutine function) until it returns something truthy;
    fail naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        found = probe()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}: {describe()}")
