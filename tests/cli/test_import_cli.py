"""`opencrab import codex|claude`: the JSON summary, agent choice, errors, and the
progress bar a terminal gets."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from opencrab.cli import build_app
from tests.fakes.corpora import CLAUDE_CORPUS as CLAUDE
from tests.fakes.corpora import CODEX_CORPUS as CORPUS
from tests.fakes.corpora import CODEX_FILES as FILES
from tests.fakes.corpora import last_total
from tests.fakes.transcripts import WRITTEN_ASSISTANT, WRITTEN_USER, written_rollout

runner = CliRunner()
app = build_app()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_codex_json_summary_and_a_second_run(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    assert run("agent", "create", "-n", "coder", "-p", "You code.", "--data-dir", data_dir)[0] == 0
    code, out, err = run("import", "codex", str(CORPUS), "--data-dir", data_dir, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["files"] == 6
    assert summary["lines"] == sum(len(p.read_bytes().splitlines()) for p in FILES)
    assert summary["messages"] == summary["lines"]
    assert set(summary["messages_by_source_type"]) == {
        "message",
        "meta",
        "session",
        "tool_call",
        "tool_result",
    }
    assert summary["problems"] == []
    assert summary["tokens"]["total_tokens"] == sum(last_total(p) for p in FILES)
    assert summary["agent_id"] is not None  # the only agent
    assert summary["models_without_price"] == ["openai/gpt-5.3-codex"]
    again = json.loads(run("import", "codex", str(CORPUS), "--data-dir", data_dir, "--json")[1])
    assert again["files_by_status"] == {"unchanged": 6}
    assert again["messages"] == 0


def test_table_output_problems_and_agent_choice(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    code, out, err = run("import", "claude", str(CLAUDE), "--data-dir", data_dir)
    assert code == 0, err
    assert "1 file (1 new): 22 new lines" in out  # one file, not "1 files"
    assert "not valid JSON" in err  # problems on stderr, with file and line
    assert "/4f35e220-c435-4cf7-b9b9-f40426042847.jsonl:20:" in err.replace("\n", "")
    assert "no agent" in err
    for name in ("a", "b"):
        assert run("agent", "create", "-n", name, "-p", "Hi.", "--data-dir", data_dir)[0] == 0
    code, _, err = run("import", "claude", str(CLAUDE), "--data-dir", data_dir)
    assert code == 1
    assert "several agents: choose one with --agent (a, b)" in err
    code, _, err = run("import", "claude", str(CLAUDE), "--agent", "zz", "--data-dir", data_dir)
    assert code == 1
    assert "no agent 'zz'" in err
    (tmp_path / "nothing").mkdir()
    code, _, err = run("import", "codex", str(tmp_path / "nothing"), "--data-dir", data_dir)
    assert code == 1
    assert "no Codex rollouts" in err  # a folder that is there, holding none


def test_a_terminal_gets_a_progress_bar(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "opencrab")
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    process = subprocess.Popen(
        [exe, "import", "codex", str(CORPUS), "--data-dir", str(tmp_path / "d"), "--json"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        shown += chunk
    out, _ = process.communicate(timeout=120)
    os.close(leader)
    assert process.returncode == 0
    assert b"importing codex" in shown
    assert json.loads(out)["files"] == 6  # stdout stays pure JSON


def test_a_missing_path_is_named_and_nothing_is_imported(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    missing = tmp_path / "no-such-folder"
    code, out, err = run("import", "codex", str(missing), str(CORPUS), "--data-dir", data_dir)
    assert code == 1
    assert f"{missing} does not exist: nothing was imported" in " ".join(err.split())
    code, out, err = run("import", "codex", str(CORPUS), "--data-dir", data_dir, "--json")
    assert json.loads(out)["files_by_status"] == {"new": 6}  # the first run stored nothing


def test_search_shows_imported_text_as_written(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    written_rollout(tmp_path / "written")
    code, out, err = run("import", "codex", str(tmp_path / "written"), "--data-dir", data_dir)
    assert code == 0, err
    assert out.startswith("1 file (1 new): 3 new lines")
    for words in (["&&"], ["x", "<", "y"], ["<script>window.pwned"], ["Vec<String>"]):
        code, out, err = run("import", "search", *words, "--data-dir", data_dir)
        assert code == 0, err
        assert WRITTEN_USER.endswith(out.splitlines()[-1].strip().lstrip("…")), words
        assert "<script>window.pwned = 1</script> Vec<String> done\n" in out, words
        assert "&amp;" not in out
        assert "&lt;" not in out
    code, out, _ = run("import", "search", "x<y;", "--data-dir", data_dir, "--json")
    (hit,) = json.loads(out)
    assert (hit["role"], hit["line"], hit["snippet"]) == ("assistant", 3, WRITTEN_ASSISTANT)
    code, out, _ = run("import", "search", "&amp;&amp;", "--data-dir", data_dir)
    assert (code, out) == (0, "no imported message holds every word\n")
