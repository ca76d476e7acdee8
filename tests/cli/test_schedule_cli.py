"""`opencrab schedule add|list|runs|pause|resume|remove|run-now` end to end, the model
the fake OpenAI server: what a user types and reads, bad input named by its field."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, completion
from tests.fakes.ports import closed_port

runner = CliRunner()
app = build_app()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, f"exit {code}: {err}{out}"
    return out


@pytest.fixture(autouse=True)
def wired(fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch) -> FakeLlmServer:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", url)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    return fake_llm_server


def test_add_list_run_now_pause_resume_remove(wired: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "aki", "--prompt", "Terse.")
    made = json.loads(
        ok(
            "schedule",
            "add",
            "aki",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--prompt",
            "Stand-up summary",
            "--json",
        )
    )
    assert made["kind"] == "cron"
    assert made["createdBy"] == "cli"
    assert made["timezone"] == "Europe/Berlin"
    assert made["nextSlot"]
    listed = json.loads(ok("schedule", "list", "--agent", "aki", "--json"))
    assert [s["id"] for s in listed] == [made["id"]]
    shown = ok("schedule", "list")  # a table (narrow here: long cells wrap)
    assert "aki" in shown
    assert "active" in shown

    wired.reply(CHAT, Reply(json=completion({"content": "Nothing blocked."})))
    ran = json.loads(ok("schedule", "run-now", made["id"], "--json"))
    assert ran["status"] == "succeeded"
    assert ran["trigger"] == "manual"
    assert ran["detail"] == "Nothing blocked."
    assert ran["sessionId"]
    runs = json.loads(ok("schedule", "runs", made["id"], "--json"))
    assert [r["id"] for r in runs] == [ran["id"]]

    assert "paused" in ok("schedule", "pause", made["id"])
    assert json.loads(ok("schedule", "list", "--json"))[0]["paused"] is True
    assert "resumed" in ok("schedule", "resume", made["id"])
    ok("schedule", "remove", made["id"])
    assert json.loads(ok("schedule", "list", "--json")) == []
    code, out, err = run("schedule", "remove", made["id"])
    assert code == 1
    assert "no schedule" in err + out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--cron", "0 9 * *", "--tz", "UTC"), "cron:"),
        (("--cron", "0 9 * * *", "--tz", "Nowhere/Land"), "timezone:"),
        (("--every", "5"), "everySecs:"),
        (("--every", "600", "--post", "discord"), "--post:"),
    ],
)
def test_bad_input_names_the_field(args: tuple[str, ...], field: str) -> None:
    ok("agent", "create", "--name", "aki", "--prompt", "Terse.")
    code, out, err = run("schedule", "add", "aki", "--prompt", "x", *args)
    assert code == 1, out
    assert field in err + out
    assert json.loads(ok("schedule", "list", "--json")) == []


def test_a_schedule_for_an_agent_that_does_not_exist_names_the_agent() -> None:
    code, out, err = run("schedule", "add", "ghost", "--every", "600", "--prompt", "x")
    assert code == 1
    assert "agent: there is no agent 'ghost'" in " ".join((err + out).split())
