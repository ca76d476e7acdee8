"""OpenCrab's tmux server with real tmux on a private socket and the scripted sub-agent."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from opencrab.agentmode.tmux import Pane, TmuxError, TmuxServer, process_tree
from tests.fakes.private_tmux import alive

AGENT = str(Path(__file__).resolve().parents[1] / "fakes" / "scripted_agent.py")
T = TypeVar("T")

HAZARD = 'it\'s "quoted" $(touch /tmp/oc-pwned) `id` $HOME\nsecond line 日本語のテキスト'


async def eventually(probe: Callable[[], Awaitable[T]], what: str, timeout: float = 30.0) -> T:
    """Poll `probe` until it returns something truthy (a hang guard, not a speed check)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


async def start(
    server: TmuxServer, tmp_path: Path, steps: list[dict[str, Any]], *extra: str, **kw: Any
) -> Pane:
    script = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    script.write_text(json.dumps(steps, ensure_ascii=False), encoding="utf-8")
    return await server.open_pane([sys.executable, AGENT, str(script), *extra], cwd=tmp_path, **kw)


async def ended(server: TmuxServer, pane: Pane) -> Any:
    async def probe() -> Any:
        state = await server.pane_state(pane.pane_id)
        return state if state.dead else None

    return await eventually(probe, f"pane {pane.pane_id} ends")


async def test_argv_reaches_the_program_untouched_with_its_env_and_cwd(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    home = tmp_path / "agent-home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OC_MULTI": "a\nb 日本"}
    steps = [
        {"argv_to": "argv.json"},
        {"env_to": "env.json", "names": ["HOME", "OC_MULTI", "USER"]},
        {"pid_to": "pid.txt"},
        {"write": "cwd.txt", "content": "here"},
    ]
    pane = await start(tmux_server, tmp_path, steps, HAZARD, "", "--flag=$(x)", env=env)
    state = await ended(tmux_server, pane)
    assert state.exit_status == 0
    assert json.loads((tmp_path / "argv.json").read_text("utf-8")) == [HAZARD, "", "--flag=$(x)"]
    assert json.loads((tmp_path / "env.json").read_text("utf-8")) == {
        "HOME": str(home),
        "OC_MULTI": "a\nb 日本",
        "USER": None,  # exactly the environment given, nothing of the server's
    }
    assert (tmp_path / "cwd.txt").read_text() == "here"
    assert not Path("/tmp/oc-pwned").exists()
    # the pid recorded is the program's own (the launcher exec'd into it), not a shell's
    assert int((tmp_path / "pid.txt").read_text()) == pane.pid
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("opencrab-launch-*"))


async def test_a_pane_stays_after_its_program_exits_with_the_exit_code(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    pane = await start(tmux_server, tmp_path, [{"print": "last words 最後"}, {"exit": 7}])
    state = await ended(tmux_server, pane)
    assert (state.exit_status, state.exit_signal) == (7, None)
    assert "last words 最後" in await tmux_server.capture(pane.pane_id)
    again = await tmux_server.pane_state(pane.pane_id)  # remain-on-exit: still there
    assert again.dead
    assert again.exit_status == 7


async def test_a_killed_program_reports_the_signal(tmux_server: TmuxServer, tmp_path: Path) -> None:
    pane = await start(tmux_server, tmp_path, [{"pid_to": "pid.txt"}, {"sleep": 600}])
    await eventually(lambda: asyncio.to_thread((tmp_path / "pid.txt").exists), "pid file")
    os.kill(pane.pid, 9)
    state = await ended(tmux_server, pane)
    assert (state.exit_status, state.exit_signal) == (None, 9)


async def test_answers_arrive_intact_single_and_multi_line(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    steps = [
        {"ask": "First question?", "answer_to": "a1.txt"},
        {"ask": "Second question?", "answer_to": "a2.txt"},
        {"print": "done"},
        {"sleep": 600},
    ]
    pane = await start(tmux_server, tmp_path, steps)

    async def shows(text: str) -> bool:
        return text in await tmux_server.capture(pane.pane_id)

    await eventually(lambda: shows("First question?"), "the first question")
    one = "はい、進めてください 'yes' \"$(rm -rf /)\" ; exit"
    await tmux_server.send_text(pane.pane_id, one)
    await eventually(lambda: asyncio.to_thread((tmp_path / "a1.txt").exists), "answer 1")
    assert (tmp_path / "a1.txt").read_text("utf-8") == one

    await eventually(lambda: shows("Second question?"), "the second question")
    many = "一行目: use JWT\n二行目: keep `tests` green\n\tthird, indented\n"
    await tmux_server.send_text(pane.pane_id, many)
    await eventually(lambda: shows("done"), "the program goes on after the answer")
    assert (tmp_path / "a2.txt").read_text("utf-8") == many.rstrip("\n")
    assert not (await tmux_server.pane_state(pane.pane_id)).dead


async def test_capture_returns_the_last_lines(tmux_server: TmuxServer, tmp_path: Path) -> None:
    steps = [{"print": f"line {i:03d} 行"} for i in range(300)] + [{"sleep": 600}]
    pane = await start(tmux_server, tmp_path, steps)

    async def tail() -> str | None:
        text = await tmux_server.capture(pane.pane_id, lines=10)
        return text if text.endswith("line 299 行") else None

    text = await eventually(tail, "all 300 lines printed")
    assert text.splitlines() == [f"line {i:03d} 行" for i in range(290, 300)]


async def test_terminate_ends_the_whole_tree_even_when_sigterm_is_ignored(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    steps = [
        {"spawn": 2, "depth": 3},
        {"spawn": 1, "depth": 2, "setsid": True},  # its own session: found by parentage
        {"ignore_sigterm": True},
        {"spawn": 1, "depth": 2},  # these ignore SIGTERM too: SIGKILL must follow
        {"pid_to": "pid.txt"},
        {"sleep": 600},
    ]
    pane = await start(tmux_server, tmp_path, steps)
    await eventually(lambda: asyncio.to_thread((tmp_path / "pid.txt").exists), "spawned")

    # 1 agent + 2 trees of 3 + 1 setsid tree of 2 + 1 tree of 2 = 11 processes
    def full_tree() -> set[int] | None:
        found = process_tree(pane.pid)
        return found if len(found) >= 11 else None

    tree = await eventually(lambda: asyncio.to_thread(full_tree), "all grandchildren started")
    assert len(tree) == 11
    ended_ = await tmux_server.terminate(pane.pane_id, grace=0.5)
    assert ended_.survivors == []
    assert set(ended_.signalled) >= tree
    assert [pid for pid in tree if alive(pid)] == []
    state = await ended(tmux_server, pane)
    assert state.exit_signal == 9  # it ignored SIGTERM


async def test_panes_are_listed_with_their_labels_after_a_restart(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    labels = {"task": "task-001", "session": "a1b2", "note": 'say "hi" $x 日本'}
    first = await start(tmux_server, tmp_path, [{"sleep": 600}], labels=labels, name="task-001")
    second = await start(tmux_server, tmp_path, [{"exit": 3}], labels={"task": "task-002"})
    await ended(tmux_server, second)

    restarted = TmuxServer(tmux_server.socket)  # a new process finds what the old one left
    panes = {p.pane_id: p for p in await restarted.list_panes()}
    assert set(panes) == {first.pane_id, second.pane_id}
    assert panes[first.pane_id].labels == labels
    assert panes[first.pane_id].pid == first.pid
    assert panes[first.pane_id].window_name == "task-001"
    assert not panes[first.pane_id].dead
    assert panes[second.pane_id].labels == {"task": "task-002"}
    assert (panes[second.pane_id].dead, panes[second.pane_id].exit_status) == (True, 3)

    await restarted.kill_pane(first.pane_id)
    assert [p.pane_id for p in await restarted.list_panes()] == [second.pane_id]
    assert not alive(first.pid)


async def test_the_server_starts_on_demand_once(tmux_server: TmuxServer, tmp_path: Path) -> None:
    assert not await tmux_server.is_running()
    assert await tmux_server.list_panes() == []
    await asyncio.gather(*(tmux_server.ensure_server() for _ in range(3)))
    pid = await tmux_server.server_pid()
    await start(tmux_server, tmp_path, [{"exit": 0}])
    assert await tmux_server.server_pid() == pid
    out = await tmux_server.run("show-options", "-g", "-v", "remain-on-exit")
    assert out.strip() == "on"


async def test_a_gone_pane_is_a_tmux_error_and_ending_it_again_is_a_no_op(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    pane = await start(tmux_server, tmp_path, [{"sleep": 600}])
    await tmux_server.kill_pane(pane.pane_id)
    assert not alive(pane.pid)
    # tmux answers `display-message -t` for a pane that is gone with empty fields
    with pytest.raises(TmuxError, match=f"pane {pane.pane_id} is gone"):
        await tmux_server.pane_state(pane.pane_id)
    again = await tmux_server.kill_pane(pane.pane_id)
    assert again.signalled == []
    assert again.survivors == []
