"""The signal path of the coding CLIs: the hook / notify command appending to the signals
file (run as the CLIs run it, in a subprocess), the reader, the mapping to statuses and
the screen-pattern fallback that must not match text echoed from the prompt."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from opencrab.agentmode.clis import (
    CLAUDE_CODE,
    CODEX,
    CODEX_KEY_VAR,
    Endpoint,
    match_screen,
    observe,
    prepare,
    profile_for,
    signal_command,
)
from opencrab.agentmode.signals import Signal, read_signals, record, signals_path
from opencrab.errors import ValidationError

CLAUDE_PROMPT_SCREEN = """\
● Write(hello.txt)
 Create file
 hello.txt
 Do you want to create hello.txt?
 ❯ 1. Yes
   2. Yes, and switch to accept edits
   3. No
 Esc to cancel · Tab to amend
"""


def hook(signal_dir: Path, source: str, stdin: str = "", *args: str) -> None:
    """Run the hook command exactly as a CLI would (its argv, JSON on stdin or argv)."""
    argv = [*signal_command(signal_dir, source), *args]
    subprocess.run(argv, input=stdin, text=True, check=True, env={"PATH": os.environ["PATH"]})


def test_hooks_and_notify_append_one_line_each_and_the_reader_returns_them(
    tmp_path: Path,
) -> None:
    stop = {"hook_event_name": "Stop", "last_assistant_message": "Done: 完了"}
    hook(tmp_path, "claude", json.dumps(stop))
    notify = {"type": "agent-turn-complete", "last-assistant-message": "ok"}
    hook(tmp_path, "codex", "", json.dumps(notify))

    found, offset = read_signals(tmp_path)

    assert [(s.source, s.event) for s in found] == [
        ("claude", "Stop"),
        ("codex", "agent-turn-complete"),
    ]
    assert found[0].payload["last_assistant_message"] == "Done: 完了"
    assert offset == signals_path(tmp_path).stat().st_size
    assert signals_path(tmp_path).stat().st_mode & 0o777 == 0o600
    assert read_signals(tmp_path, offset) == ([], offset)


def test_a_line_still_being_written_waits_for_the_next_read(tmp_path: Path) -> None:
    record(tmp_path, "claude", '{"hook_event_name": "Notification"}')
    with signals_path(tmp_path).open("ab") as f:
        f.write(b'{"source": "claude", "event": "St')
    found, offset = read_signals(tmp_path)
    assert [s.event for s in found] == ["Notification"]
    with signals_path(tmp_path).open("ab") as f:
        f.write(b'op", "at": 1.0, "payload": {}}\n')
    more, _ = read_signals(tmp_path, offset)
    assert [s.event for s in more] == ["Stop"]


def test_concurrent_hooks_never_interleave_their_lines(tmp_path: Path) -> None:
    big = "x" * 20000
    procs = [
        subprocess.Popen(
            [*signal_command(tmp_path, "claude"), "--event", f"E{n}"],
            stdin=subprocess.PIPE,
            text=True,
        )
        for n in range(12)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"message": big}))
        proc.stdin.close()
    assert [proc.wait() for proc in procs] == [0] * 12
    lines = signals_path(tmp_path).read_bytes().splitlines()
    assert len(lines) == 12
    assert sorted(json.loads(line)["event"] for line in lines) == sorted(f"E{n}" for n in range(12))


def test_input_that_is_not_json_is_kept_as_raw_text(tmp_path: Path) -> None:
    hook(tmp_path, "gemini", "not json", "--event", "AfterAgent")
    found, _ = read_signals(tmp_path)
    assert (found[0].event, found[0].payload) == ("AfterAgent", {"raw": "not json"})


def sig(event: str, **payload: object) -> Signal:
    return Signal("claude", event, 0.0, dict(payload))


def test_signals_map_to_statuses_the_last_decisive_one_winning() -> None:
    asked = sig("Notification", notification_type="permission_prompt", message="Allow Bash?")
    assert observe([]).status == "Running"
    waiting = observe([asked])
    assert (waiting.status, waiting.question) == ("WaitingInput", "Allow Bash?")
    done = observe([asked, sig("Stop", last_assistant_message="All done.")])
    assert (done.status, done.source, done.summary) == ("Completed", "Hook", "All done.")
    idle = sig("Notification", notification_type="idle_prompt", message="waiting")
    assert observe([sig("Stop"), idle]).status == "Completed"  # idle after finishing
    assert observe([idle]).status == "WaitingInput"
    ended = observe([sig("SessionEnd", reason="logout")])
    assert (ended.status, ended.detail["reason"]) == ("Error", "session ended: logout")
    codex = Signal("codex", "agent-turn-complete", 0.0, {"last-assistant-message": "fine"})
    assert (observe([codex]).status, observe([codex]).summary) == ("Completed", "fine")


def test_the_pane_exit_decides_when_no_hook_did() -> None:
    assert (observe([], 0).status, observe([], 0).source) == ("Completed", "ProcessExit")
    failed = observe([], 3)
    assert (failed.status, failed.source, failed.detail) == (
        "Error",
        "ProcessExit",
        {"exit_status": "3"},
    )
    assert observe([sig("Stop")], 1).source == "Hook"  # a finished task stays finished


def test_the_screen_fallback_finds_a_prompt_but_never_one_echoed_from_the_prompt() -> None:
    found = match_screen(CLAUDE_CODE, CLAUDE_PROMPT_SCREEN)
    assert found is not None
    assert (found.status, found.question) == ("WaitingInput", "Do you want to create hello.txt?")
    prompt = "Ask me this:\nDo you want to create hello.txt?\n1. Yes\n2. No"
    echoed = "❯ Ask me this:\n  Do you want to create hello.txt?\n\n  1. Yes\n  2. No\n● Working…\n"
    assert match_screen(CLAUDE_CODE, echoed, "") is not None  # what the echo looks like
    assert match_screen(CLAUDE_CODE, echoed, prompt) is None
    assert match_screen(CLAUDE_CODE, echoed + CLAUDE_PROMPT_SCREEN, prompt) == found
    assert match_screen(CLAUDE_CODE, "Do you want to create hello.txt?\n", "") is None  # no choices
    seen = observe([], screen=CLAUDE_PROMPT_SCREEN, profile=CLAUDE_CODE, prompt=prompt)
    assert (seen.status, seen.source) == ("WaitingInput", "OutputPattern")
    assert observe([sig("Stop")], screen=CLAUDE_PROMPT_SCREEN, profile=CLAUDE_CODE).status == (
        "Completed"
    )  # signals first; the screen only while nothing else is known
    codex_screen = (
        "Would you like to run the following command?\n  $ rm -rf build\n› 1. Yes, proceed\n"
    )
    codex = match_screen(CODEX, codex_screen)
    assert codex is not None
    assert codex.question == "Would you like to run the following command?"


def test_each_sub_agent_gets_its_own_home_with_opencrabs_endpoint_and_hooks(
    tmp_path: Path,
) -> None:
    claude = prepare(
        CLAUDE_CODE,
        executable="/opt/claude",
        home=tmp_path / "h1",
        workdir=tmp_path / "wt",
        signal_dir=tmp_path / "s1",
        endpoint=Endpoint("http://127.0.0.1:9", "sk-ant-key-0123456789abcdefghijkl"),
        prompt='a "quoted" prompt',
    )
    assert claude.argv == ["/opt/claude", "--dangerously-skip-permissions", 'a "quoted" prompt']
    assert claude.env["HOME"] == str(tmp_path / "h1")
    assert claude.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert claude.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    settings = json.loads((tmp_path / "h1" / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == {"Stop", "Notification", "SessionEnd"}
    assert settings["hooks"]["Notification"][0]["matcher"] == "permission_prompt|idle_prompt"
    state = json.loads((tmp_path / "h1" / ".claude.json").read_text())
    assert state["customApiKeyResponses"]["approved"] == ["0123456789abcdefghijkl"[-20:]]
    assert state["projects"][str(tmp_path / "wt")]["hasTrustDialogAccepted"] is True
    assert (tmp_path / "h1" / ".claude.json").stat().st_mode & 0o777 == 0o600

    codex = prepare(
        CODEX,
        executable="/opt/codex",
        home=tmp_path / "h2",
        workdir=tmp_path / "wt",
        signal_dir=tmp_path / "s2",
        endpoint=Endpoint("http://127.0.0.1:9/v1", "sk-codex", "gpt-5-codex"),
        prompt="p",
        full_auto=False,
    )
    assert codex.argv[1:] == [
        "--no-daemon",
        "--ask-for-approval",
        "on-request",
        "--sandbox",
        "read-only",
        "p",
    ]
    assert codex.env[CODEX_KEY_VAR] == "sk-codex"
    config = tomllib.loads((tmp_path / "h2" / ".codex" / "config.toml").read_text())
    assert config["model_provider"] == "opencrab"
    assert config["model_providers"]["opencrab"]["wire_api"] == "responses"
    assert config["notify"] == signal_command(tmp_path / "s2", "codex")
    assert config["projects"][str(tmp_path / "wt")]["trust_level"] == "trusted"


def test_an_unknown_cli_name_is_refused_by_name() -> None:
    assert profile_for("claude") is CLAUDE_CODE
    assert profile_for("Codex") is CODEX
    with pytest.raises(ValidationError, match="unknown coding CLI 'vim'"):
        profile_for("vim")


def test_only_the_codex_thread_the_prompt_started_completes_the_task() -> None:
    def notify(thread: str, inputs: list[str], last: str) -> Signal:
        payload = {"thread-id": thread, "input-messages": inputs, "last-assistant-message": last}
        return Signal("codex", "agent-turn-complete", 0.0, payload)

    title = notify("t-title", ["Generate a concise, single-line task title"], "Hello task")
    main = notify("t-main", ["Create hello.txt"], "Wrote it.")
    assert observe([title], prompt="Create hello.txt").status == "Running"
    done = observe([title, main], prompt="Create hello.txt")
    assert (done.status, done.summary) == ("Completed", "Wrote it.")
    later = notify("t-title", ["Generate a concise, single-line task title"], "again")
    assert observe([main, later], prompt="Create hello.txt").summary == "Wrote it."
