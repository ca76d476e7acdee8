"""The real Claude Code and Codex CLIs (pinned in clis/, installed by `make clis`) run under
OpenCrab's control: each in a real tmux pane on a private socket, in its own HOME, in a
temp git repository, against a scripted model on 127.0.0.1. Completion arrives through
their hook / notify signals, a permission prompt is surfaced and answered through the
pane, and their transcripts are imported so their tokens appear in llm_usage_metrics."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa

from opencrab.agentmode.clis import (
    CLAUDE_CODE,
    CODEX,
    Endpoint,
    Launch,
    Observation,
    Profile,
    ScreenMatch,
    find_executable,
    match_screen,
    observe,
    prepare,
)
from opencrab.agentmode.signals import read_signals
from opencrab.agentmode.tmux import Pane, TmuxServer
from opencrab.importers.store import Importer
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics
from tests.agentmode.runner_support import CLIS_BIN, OFFLINE
from tests.fakes.coding_models import INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, Text, ToolCall
from tests.fakes.llm_server import FakeLlmServer

PROMPT = 'Create hello.txt — keep "quotes", $HOME, `backticks`; and 日本語 as they are.'
WAIT = 180.0  # a guard against hanging forever, not a speed limit

T = TypeVar("T")


@pytest.fixture
async def tmux(tmux_server: TmuxServer, tmp_path: Path) -> AsyncIterator[TmuxServer]:
    """OpenCrab's tmux server on a private socket; afterwards no process started under
    tmp_path may be left (a CLI's background daemon would outlive its pane)."""
    yield tmux_server
    await tmux_server.kill_server()

    async def gone() -> bool | None:
        return True if not leftovers(tmp_path) else None

    async def describe() -> str:
        return str(leftovers(tmp_path))

    try:
        await wait_for(gone, "exit of every process the test started", describe)
    finally:
        for pid in leftovers(tmp_path):
            os.kill(pid, signal.SIGKILL)


def leftovers(tmp_path: Path) -> list[int]:
    """Processes whose command line names a path under tmp_path (a sub-agent HOME, …)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(tmp_path).encode() in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, as a task's worktree would be."""
    path = tmp_path / "repo"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (path / "README.md").write_text("demo\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return path


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], what: str, describe: Callable[[], Awaitable[str]]
) -> T:
    """Poll `probe` until it returns something; fail naming `what` and the screen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while loop.time() < deadline:
        found = await probe()
        if found is not None:
            return found
        await asyncio.sleep(0.2)
    pytest.fail(f"no {what} within {WAIT:.0f} s; the pane shows:\n{await describe()}")


def launch(
    profile: Profile,
    tmp_path: Path,
    repo: Path,
    endpoint: Endpoint,
    *,
    full_auto: bool = True,
) -> Launch:
    return prepare(
        profile,
        executable=find_executable(profile, [CLIS_BIN]),
        home=tmp_path / f"home-{profile.agent_type}",
        workdir=repo,
        signal_dir=tmp_path / f"signals-{profile.agent_type}",
        endpoint=endpoint,
        prompt=PROMPT,
        full_auto=full_auto,
        extra_env=OFFLINE,
    )


def screen(tmux: TmuxServer, pane: Pane) -> Callable[[], Awaitable[str]]:
    """What the pane shows, for failure messages."""
    return lambda: tmux.capture(pane.pane_id)


async def status(tmux: TmuxServer, pane: Pane, run: Launch) -> Observation:
    found, _ = read_signals(run.signal_dir)
    state = await tmux.pane_state(pane.pane_id)
    exit_status = (
        (state.exit_status if state.exit_signal is None else 128 + state.exit_signal)
        if state.dead
        else None
    )
    return observe(found, exit_status, prompt=run.prompt)


async def until(tmux: TmuxServer, pane: Pane, run: Launch, wanted: str) -> Observation:
    async def probe() -> Observation | None:
        now = await status(tmux, pane, run)
        if now.status == "Error":
            pytest.fail(f"the sub-agent failed: {now}\n{await tmux.capture(pane.pane_id)}")
        return now if now.status == wanted else None

    return await wait_for(probe, wanted, screen(tmux, pane))


async def the_cli_runs_in_the_pane(tmux: TmuxServer, pane: Pane, executable: str) -> None:
    """The pane's pid is the CLI itself (started without a shell), not a shell around it."""
    cmdline = Path(f"/proc/{pane.pid}/cmdline")

    async def program() -> str | None:  # the launcher's forked child until it has exec'd
        # (read while the exec swaps the process's memory, cmdline is empty)
        name = Path(cmdline.read_bytes().split(b"\0")[0].decode()).name
        return None if not name or name.startswith("python") else name

    name = await wait_for(program, "exec of the CLI", screen(tmux, pane))
    assert name in {Path(executable).name, "node"}  # node: codex.js on Node < 22 (no execve)


async def settled(run: Launch, last_message: str, tmux: TmuxServer, pane: Pane) -> None:
    """Wait until the CLI's transcript holds its last message (a hook may fire before
    the CLI has written its final transcript lines)."""
    assert run.transcripts is not None
    folder = run.transcripts

    async def holds() -> bool | None:
        files = folder.rglob("*.jsonl") if folder.is_dir() else []
        return True if any(last_message in f.read_text(errors="replace") for f in files) else None

    await wait_for(holds, f"transcript holding {last_message!r}", screen(tmux, pane))


async def press_enter_until_answered(tmux: TmuxServer, pane: Pane, question: str) -> None:
    """Choose a prompt's highlighted answer. A TUI that has drawn its prompt may not read
    keys yet (Codex drops a key that comes right after the prompt is drawn), so Enter is
    pressed again while the question stays on the screen; with the prompt gone, an extra
    Enter meets an empty input box and does nothing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while question in await tmux.capture(pane.pane_id):
        if loop.time() > deadline:
            pytest.fail(
                f"the answer to {question!r} never arrived:\n{await tmux.capture(pane.pane_id)}"
            )
        await tmux.run("send-keys", "-t", pane.pane_id, "Enter")
        for _ in range(25):  # up to ~5 s for the screen to move on before pressing again
            await asyncio.sleep(0.2)
            if question not in await tmux.capture(pane.pane_id):
                return


async def imported(
    db: Database, kind: str, run: Launch, count: int, tmux: TmuxServer, pane: Pane
) -> list[sa.Row[tuple[str, str, int, int]]]:
    """Import the CLI's transcripts (incrementally) until `count` usage rows exist: the
    last message can reach the transcript before the turn's token counts do."""
    assert run.transcripts is not None
    folder = run.transcripts

    async def rows() -> list[sa.Row[tuple[str, str, int, int]]] | None:
        await asyncio.to_thread(Importer(db, kind).run, [folder])
        found = usage_rows(db)
        return found if len(found) >= count else None

    return await wait_for(rows, f"{count} usage rows imported", screen(tmux, pane))


def usage_rows(db: Database) -> list[sa.Row[tuple[str, str, int, int]]]:
    m = llm_usage_metrics.c
    query = sa.select(m.provider, m.model, m.input_tokens, m.output_tokens).order_by(m.timestamp)
    with db.read() as conn:
        return list(conn.execute(query))


async def test_claude_code_edits_a_file_and_its_stop_hook_reports_completion(
    tmux: TmuxServer, tmp_path: Path, repo: Path, fake_llm_server: FakeLlmServer, db: Database
) -> None:
    target = repo / "hello.txt"
    model = ScriptedModel(
        [
            ToolCall("Write", {"file_path": str(target), "content": "hello from claude\n"}),
            Text("Wrote hello.txt."),
        ]
    ).serve_anthropic(fake_llm_server)
    endpoint = Endpoint(fake_llm_server.url, "sk-ant-opencrab-test-0123456789", "claude-sonnet-4-5")
    run = launch(CLAUDE_CODE, tmp_path, repo, endpoint)
    pane = await tmux.open_pane(run.argv, env=run.env, cwd=run.cwd)
    await the_cli_runs_in_the_pane(tmux, pane, run.argv[0])

    done = await until(tmux, pane, run, "Completed")

    assert (done.source, done.summary) == ("Hook", "Wrote hello.txt.")
    assert target.read_text() == "hello from claude\n"
    first = model.requests[0].json
    assert PROMPT in str(first["messages"][0]["content"])  # the prompt arrived intact
    assert {r.headers.get("x-api-key") for r in model.requests} == {endpoint.api_key}
    assert done.transcript is not None
    assert Path(done.transcript).is_relative_to(run.home)

    await settled(run, "Wrote hello.txt.", tmux, pane)
    rows = await imported(db, "claude", run, 2, tmux, pane)
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [
        (INPUT_TOKENS, OUTPUT_TOKENS),
        (INPUT_TOKENS, OUTPUT_TOKENS),
    ]
    assert {r.model for r in rows} == {"claude-sonnet-4-5"}


async def test_codex_edits_a_file_and_its_notify_reports_completion(
    tmux: TmuxServer, tmp_path: Path, repo: Path, fake_llm_server: FakeLlmServer, db: Database
) -> None:
    model = ScriptedModel(
        [
            ToolCall("exec_command", {"cmd": "printf 'hello from codex\\n' > hello.txt"}),
            Text("Wrote hello.txt."),
        ]
    ).serve_responses(fake_llm_server)
    endpoint = Endpoint(f"{fake_llm_server.url}/v1", "sk-opencrab-codex-test", "gpt-5-codex")
    run = launch(CODEX, tmp_path, repo, endpoint)
    pane = await tmux.open_pane(run.argv, env=run.env, cwd=run.cwd)
    await the_cli_runs_in_the_pane(tmux, pane, run.argv[0])

    done = await until(tmux, pane, run, "Completed")

    assert (done.source, done.summary) == ("Hook", "Wrote hello.txt.")
    assert (repo / "hello.txt").read_text() == "hello from codex\n"
    assert PROMPT in str(model.requests[0].json["input"])
    auth = {r.headers.get("authorization") for r in model.requests}
    assert auth == {f"Bearer {endpoint.api_key}"}

    await settled(run, "Wrote hello.txt.", tmux, pane)
    rows = await imported(db, "codex", run, 2, tmux, pane)
    assert len(rows) == 2
    assert {(r.input_tokens, r.output_tokens) for r in rows} == {(INPUT_TOKENS, OUTPUT_TOKENS)}
    assert {r.model for r in rows} == {"gpt-5-codex"}


async def test_a_claude_code_permission_prompt_is_surfaced_with_its_question_and_answered(
    tmux: TmuxServer, tmp_path: Path, repo: Path, fake_llm_server: FakeLlmServer
) -> None:
    target = repo / "hello.txt"
    ScriptedModel(
        [
            ToolCall("Write", {"file_path": str(target), "content": "approved\n"}),
            Text("Wrote it after approval."),
        ]
    ).serve_anthropic(fake_llm_server)
    endpoint = Endpoint(fake_llm_server.url, "sk-ant-opencrab-test-0123456789")
    run = launch(CLAUDE_CODE, tmp_path, repo, endpoint, full_auto=False)
    pane = await tmux.open_pane(run.argv, env=run.env, cwd=run.cwd)

    waiting = await until(tmux, pane, run, "WaitingInput")

    assert waiting.question == "Claude needs your permission"
    assert not target.exists()  # nothing written before the answer

    async def on_screen() -> ScreenMatch | None:
        return match_screen(CLAUDE_CODE, await tmux.capture(pane.pane_id), PROMPT)

    asked = await wait_for(on_screen, "permission question on the screen", screen(tmux, pane))
    assert asked.question == "Do you want to create hello.txt?"

    await press_enter_until_answered(tmux, pane, asked.question)  # the highlighted 1. Yes
    done = await until(tmux, pane, run, "Completed")

    assert done.summary == "Wrote it after approval."
    assert target.read_text() == "approved\n"


async def test_a_codex_approval_prompt_is_found_on_the_screen_and_answered(
    tmux: TmuxServer, tmp_path: Path, repo: Path, fake_llm_server: FakeLlmServer
) -> None:
    escalate = {
        "cmd": "printf 'approved\\n' > hello.txt",
        "sandbox_permissions": "require_escalated",  # outside the read-only sandbox: asks
        "justification": "Write hello.txt?",
    }
    ScriptedModel(
        [ToolCall("exec_command", escalate), Text("Wrote it after approval.")]
    ).serve_responses(fake_llm_server)
    endpoint = Endpoint(f"{fake_llm_server.url}/v1", "sk-opencrab-codex-test", "gpt-5-codex")
    run = launch(CODEX, tmp_path, repo, endpoint, full_auto=False)
    pane = await tmux.open_pane(run.argv, env=run.env, cwd=run.cwd)

    async def asking() -> Observation | None:  # Codex's notify has no approval event: the screen
        found, _ = read_signals(run.signal_dir)
        text = await tmux.capture(pane.pane_id)
        now = observe(found, None, screen=text, profile=CODEX, prompt=PROMPT)
        return now if now.status == "WaitingInput" else None

    waiting = await wait_for(asking, "approval prompt", screen(tmux, pane))

    assert (waiting.source, waiting.question) == (
        "OutputPattern",
        "Would you like to run the following command?",
    )
    assert not (repo / "hello.txt").exists()
    assert waiting.question is not None
    await press_enter_until_answered(tmux, pane, waiting.question)  # 1. Yes, proceed
    done = await until(tmux, pane, run, "Completed")

    assert done.summary == "Wrote it after approval."
    assert (repo / "hello.txt").read_text() == "approved\n"
