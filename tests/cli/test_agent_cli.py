"""The agent commands end to end: `opencrab chat AGENT -m …` against a fake OpenAI server.

The server's scripted replies call ws_write, learn_from_experience and send_speech; the
test then checks what a user would: the file in the workspace, the skill in `skills
list`, the trace in `events show`, the speech in `memory search`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, call, chunk, completion, tool_reply
from tests.fakes.ports import closed_port

runner = CliRunner()
app = build_app()


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str, input: str | None = None) -> str:
    code, out, err = run(*args, input=input)
    assert code == 0, f"exit {code}: {err}{out}"
    return out


@pytest.fixture(autouse=True)
def no_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", url)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", url)


@pytest.fixture
def openai_fake(fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch) -> FakeLlmServer:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    return fake_llm_server


def agent_id(name: str) -> str:
    doc = json.loads(ok("agent", "show", name, "--json"))
    return str(doc["id"])


def test_chat_turn_writes_learns_speaks_and_is_recorded(
    openai_fake: FakeLlmServer, data_dir: Path
) -> None:
    ok("agent", "create", "--name", "aki", "--prompt", "You keep tidy notes.", "--language", "ja")
    openai_fake.reply(
        CHAT,
        tool_reply(
            call("call_1", "ws_write", {"path": "notes/tokyo.md", "content": "# 東京\n晴れ"}),
            content="I'll note that down.",
        ),
        tool_reply(
            call(
                "call_2",
                "learn_from_experience",
                {
                    "experience": "wrote the weather into a note",
                    "outcome": "success",
                    "lesson": "Write facts down as soon as you hear them",
                    "skill_name": "note-first",
                },
            )
        ),
        tool_reply(call("call_3", "send_speech", {"content": "東京の天気をメモしました"})),
    )

    doc = json.loads(ok("chat", "aki", "-m", "東京は晴れです。メモして", "--json"))

    assert doc["reply"] == "東京の天気をメモしました"
    assert doc["stoppedBy"] == "send_speech"
    assert doc["error"] is None
    assert [a["name"] for a in doc["actions"]] == [
        "ws_write",
        "learn_from_experience",
        "send_speech",
    ]
    assert all(a["success"] for a in doc["actions"])
    assert doc["actions"][0]["result"] == {"path": "notes/tokyo.md", "bytes": 15}
    assert doc["traceId"] == doc["sessionId"]

    # the file is in the agent's workspace, and `workspace ls` shows it
    aid = agent_id("aki")
    note = data_dir / "agents" / aid / "workspace" / "notes" / "tokyo.md"
    assert note.read_text(encoding="utf-8") == "# 東京\n晴れ"
    listed = json.loads(ok("workspace", "ls", "aki", "notes", "--json"))
    assert [e["path"] for e in listed] == ["notes/tokyo.md"]
    # an empty folder says so (it printed nothing)
    (note.parent.parent / "empty").mkdir()
    assert ok("workspace", "ls", "aki", "empty") == "empty/ in the workspace of aki is empty\n"

    # the calls by agent name the agent (the table showed its id)
    by_agent = ok("llm", "metrics", "--group-by", "agent")
    assert "aki" in by_agent
    assert aid not in by_agent
    (group,) = json.loads(ok("llm", "metrics", "--group-by", "agent", "--json"))["groups"]
    assert (group["key"], group["name"], group["calls"]) == (aid, "aki", 3)

    # the learned skill is listed beside the five standard ones
    skills = {s["name"]: s for s in json.loads(ok("skills", "list", "aki", "--json"))}
    assert skills["note-first"]["source"] == "experience"
    assert {"autonomous", "self-learning", "workspace-management"} <= set(skills)
    assert skills["workspace-management"]["usage_count"] == 1  # ws_write was used once

    # the trace: user → reasoning → tool_call(+usage) → tool_result … → message
    events = json.loads(ok("events", "show", doc["traceId"], "--json"))
    types = [e["type"] for e in events]
    assert types == [
        "user",
        "reasoning",
        "tool_call",
        "token_usage",
        "tool_result",
        "tool_call",
        "token_usage",
        "tool_result",
        "tool_call",
        "token_usage",
        "tool_result",
        "message",
    ]
    by_id = {e["id"]: e for e in events}
    for event in events[1:]:
        assert event["parent_id"] in by_id
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["content"]["tool_call_id"] for r in results] == [c["id"] for c in calls]
    usage = [e for e in events if e["type"] == "token_usage"]
    assert {u["parent_id"] for u in usage} == {c["id"] for c in calls}
    assert events[-1]["content"]["text"] == "東京の天気をメモしました"

    # what the model was sent: the skill actions as tools, the results fed back
    sent = [r.json for r in openai_fake.requests_to(CHAT)]
    tools = {t["function"]["name"] for t in sent[0]["tools"]}
    assert {"ws_write", "send_speech", "learn_from_experience", "select_llm"} <= tools
    assert "broadcast_guidance" not in tools  # a discussant, not a facilitator
    assert sent[0]["messages"][0]["role"] == "system"
    assert "【IDENTITY】\n名前: aki\n役割: Discussant" in sent[0]["messages"][0]["content"]
    assert sent[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"path": "notes/tokyo.md", "bytes": 15}',
    }

    # memory search finds the speech, in Japanese
    hits = json.loads(ok("memory", "search", "aki", "天気をメモ", "--json"))
    assert any(h["content"] == "東京の天気をメモしました" for h in hits)
    assert hits[0]["log_type"] in ("speech", "action")


def test_path_traversal_through_ws_write_fails_and_writes_nothing_outside(
    openai_fake: FakeLlmServer, data_dir: Path, tmp_path: Path
) -> None:
    ok("agent", "create", "--name", "mallory")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    hostile = ["../../escape.txt", "/tmp/escape.txt", "notes/../../../escape.txt", "a\x00b"]
    openai_fake.reply(
        CHAT,
        tool_reply(
            *(call(f"c{i}", "ws_write", {"path": p, "content": "x"}) for i, p in enumerate(hostile))
        ),
        tool_reply(call("c9", "send_speech", {"content": "I could not write there."})),
    )

    doc = json.loads(ok("chat", "mallory", "-m", "write outside", "--json"))

    writes = [a for a in doc["actions"] if a["name"] == "ws_write"]
    assert len(writes) == len(hostile)
    assert not any(a["success"] for a in writes)
    assert all(a["failure"] for a in writes)
    assert doc["reply"] == "I could not write there."
    after = sorted(str(p) for p in tmp_path.rglob("*"))
    created = set(after) - set(before)
    aid = agent_id("mallory")
    outside = [p for p in created if not p.startswith(str(data_dir))]
    assert outside == []
    assert not any("escape" in p for p in created)
    assert not (data_dir / "agents" / aid / "workspace" / "notes").exists()


def test_malformed_calls_are_shown_to_the_model_and_the_turn_goes_on(
    openai_fake: FakeLlmServer,
) -> None:
    ok("agent", "create", "--name", "bo")
    openai_fake.reply(
        CHAT,
        tool_reply(
            call("c1", "teleport", {}),
            call("c2", "ws_write", "{not json"),
            call("c3", "ws_write", {"path": "a.md"}),  # content missing
        ),
        tool_reply(call("c4", "send_speech", {"content": "done"})),
    )

    doc = json.loads(ok("chat", "bo", "-m", "go", "--json"))

    errors = [a["failure"] for a in doc["actions"][:3]]
    assert "unknown action 'teleport'" in errors[0]
    assert "not valid JSON" in errors[1]
    assert "content" in errors[2]
    assert "required" in errors[2]
    assert doc["reply"] == "done"
    second = openai_fake.requests_to(CHAT)[1].json["messages"]
    tool_messages = [m for m in second if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3"]
    assert all('"error"' in m["content"] for m in tool_messages)


def test_plain_text_reply_and_session_continuation(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "cy")
    openai_fake.reply(
        CHAT,
        Reply(json=completion({"content": "Hello there"})),
        Reply(json=completion({"content": "You said hi before"})),
    )
    first = json.loads(ok("chat", "cy", "-m", "hi", "--json"))
    assert (first["reply"], first["stoppedBy"]) == ("Hello there", "message")

    second = json.loads(ok("chat", "cy", "-m", "again?", "--session", first["sessionId"], "--json"))

    assert second["sessionId"] == first["sessionId"]
    history = openai_fake.requests_to(CHAT)[-1].json["messages"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user"]
    assert history[2]["content"] == "Hello there"


def test_interactive_chat_streams_and_quits(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "dee")
    openai_fake.reply(
        CHAT,
        Reply(
            sse=[
                chunk({"role": "assistant", "content": "Hel"}),
                chunk({"content": "lo!"}),
                chunk(finish="stop"),
                chunk(usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}),
                "[DONE]",
            ]
        ),
    )

    out = ok("chat", "dee", input="/help\nhi\n/quit\nnever sent\n")

    assert "Hello!" in out
    # /help lists the chat's commands and is not sent to the agent
    assert "/quit, /exit, /q     leave the chat" in out
    assert "/help, /?            this list" in out
    assert "/help" not in json.dumps(openai_fake.requests_to(CHAT)[0].json)
    assert len(openai_fake.requests_to(CHAT)) == 1
    assert openai_fake.requests_to(CHAT)[0].json["stream"] is True


def test_chat_refuses_a_message_the_other_gateways_refuse(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "eve")
    code, _, err = run("chat", "eve", "-m", "-", input="x" * 5_000_000)
    assert code == 2
    assert "100,000" in err
    code, _, err = run("chat", "eve", "-m", " \n ")
    assert code == 2
    assert "empty" in err
    out = ok("chat", "eve", input="y" * 100_001 + "\n/quit\n")  # interactive: said, skipped
    assert "100,000" in out
    assert openai_fake.requests_to(CHAT) == []


def test_chat_is_refused_when_the_cli_gateway_is_off(
    openai_fake: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok("agent", "create", "--name", "fay")
    monkeypatch.setenv("OPENCRAB_GATEWAY__CLI__ENABLED", "false")
    for args in (["-m", "hi"], []):
        code, _, err = run("chat", "fay", *args, input="hi\n")
        assert code == 2
        assert "gateway.cli.enabled" in err
    assert openai_fake.requests_to(CHAT) == []


def test_agent_lifecycle_and_errors(tmp_path: Path) -> None:
    persona = tmp_path / "sage.toml"
    persona.write_text(
        'name = "sage"\nprompt = "Think first."\nlanguage = "ja"\n'
        '[soul]\npersona_name = "慎重な賢者"\n'
        "[soul.social_style]\nassertiveness = -0.5\nresponsiveness = -0.5\n"
        '[identity]\nname = "Sage"\nrole = "facilitator"\njob_title = "司会"\n'
        "[llm]\ndaily_budget_usd = 0.5\n",
        encoding="utf-8",
    )
    created = json.loads(ok("agent", "create", "--persona", str(persona), "--json"))
    assert created["soul"]["social_style"]["style_name"] == "Analytical"
    assert created["identity"]["role"] == "facilitator"
    assert created["llm_config"]["daily_budget_usd"] == 0.5
    assert created["language"] == "ja"  # the persona file's

    code, _, err = run("agent", "create", "--name", "sage")
    assert code == 1
    assert "already exists" in err

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsoul:\n  persona_name: p\n  personality:\n    openness: 7\n")
    code, _, err = run("agent", "create", "--persona", str(bad))
    assert code == 1
    assert "bad.yaml" in err
    assert "soul.personality.openness" in err

    listed = json.loads(ok("agent", "list", "--json"))
    assert [a["name"] for a in listed] == ["sage"]
    shown = ok("agent", "show", "sage")
    assert "役割: Facilitator" in shown
    assert "職種: 司会" in shown
    assert "language: ja" in shown

    code, _, err = run("agent", "show", "nobody")
    assert code == 1
    assert "no agent 'nobody'" in err

    ok("agent", "delete", "sage", "--yes")
    assert json.loads(ok("agent", "list", "--json")) == []


def test_budget_spent_refuses_the_call_with_an_error_event(
    openai_fake: FakeLlmServer, tmp_path: Path
) -> None:
    persona = tmp_path / "thrifty.json"
    persona.write_text(json.dumps({"name": "thrifty", "llm": {"daily_budget_usd": 0.0}}))
    ok("agent", "create", "--persona", str(persona))

    code, out, _ = run("chat", "thrifty", "-m", "hello", "--json")

    assert code == 1
    doc = json.loads(out)
    assert doc["type"] == "chat.done"
    assert doc["failure"]["error"] == "budget_exceeded"
    assert "budget" in doc["error"]  # the message
    assert doc["reply"] is None
    assert openai_fake.requests_to(CHAT) == []  # no call was made
    events = json.loads(ok("events", "show", doc["traceId"], "--json"))
    assert [e["type"] for e in events] == ["user", "message"]
    assert events[-1]["metadata"] == {"kind": "error", "error": "budget_exceeded"}


def test_heartbeat_tick_of_an_idle_agent_calls_no_model(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "idle")

    doc = json.loads(ok("heartbeat", "tick", "idle", "--json"))

    assert doc["decision"] == "idle"
    assert openai_fake.requests == []


def test_discuss_runs_an_autonomous_discussion(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "ann")
    ok("agent", "create", "--name", "ben")
    openai_fake.reply(
        CHAT,
        tool_reply(call("c1", "send_speech", {"content": "賛成です"})),
        tool_reply(call("c2", "send_speech", {"content": "反対です"})),
        tool_reply(call("c3", "declare_done", {})),
        tool_reply(call("c4", "declare_done", {})),
    )

    doc = json.loads(
        ok("discuss", "--theme", "週休3日制", "--agents", "ann,ben", "--max-turns", "6", "--json")
    )

    assert doc["endedBy"] == "all_done"
    assert [(t["agent"], t["spoke"]) for t in doc["turns"]] == [
        ("ann", "賛成です"),
        ("ben", "反対です"),
        ("ann", None),
        ("ben", None),
    ]
    code, _, err = run("discuss", "--theme", "t", "--agents", "ann")
    assert code == 1
    assert "at least two participants" in err


def test_agent_create_language(tmp_path: Path) -> None:
    created = json.loads(ok("agent", "create", "--name", "li", "--language", "zh", "--json"))
    assert created["language"] == "zh"
    assert "language: zh" in ok("agent", "show", "li")
    assert "【IDENTITY】\n名字: li" in ok("agent", "show", "li")
    default = json.loads(ok("agent", "create", "--name", "amy", "--json"))
    assert default["language"] == "en"
    assert "Your name is amy and your role is Discussant." in ok("agent", "show", "amy")
    code, _, err = run("agent", "create", "--name", "bad", "--language", "fr")
    assert code == 1
    assert "language 'fr' is not one of en, ja, zh" in err
    assert [a["name"] for a in json.loads(ok("agent", "list", "--json"))] == ["li", "amy"]


def test_discuss_prints_who_said_what_even_as_plain_text(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "ann")
    ok("agent", "create", "--name", "ben")
    openai_fake.reply(
        CHAT,
        Reply(json=completion({"content": "週休3日に賛成です"})),
        tool_reply(call("c1", "send_speech", {"content": "反対です"})),
        tool_reply(call("c2", "send_noreact", {})),
    )

    code, out, err = run(
        "discuss", "--theme", "週休3日制", "--agents", "ann,ben", "--max-turns", "3"
    )

    assert code == 0, err
    assert out.splitlines() == ["ann: 週休3日に賛成です", "ben: 反対です"]
    assert "ann: (passes)" in err
    assert "ended: max_turns after 3 turns" in err


def test_creating_an_agent_with_a_non_prime_heartbeat_warns(tmp_path: Path) -> None:
    persona = tmp_path / "even.toml"
    persona.write_text('name = "even"\n[heartbeat]\ninterval_secs = 30\n', encoding="utf-8")

    code, _, err = run("agent", "create", "--persona", str(persona))

    assert code == 0, err
    assert "heartbeat interval 30 s is not a prime; nearest primes: 29, 31" in err
    code, _, err = run("agent", "create", "--name", "odd")
    assert "not a prime" not in err  # the default, 29 s, is one


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".json", '{"name": "x", "soul": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        (".yaml", "name: x\nsoul: " + "[" * 100_000 + "]" * 100_000 + "\n"),
        (".toml", 'name = "x"\nsoul = ' + "[" * 100_000 + "]" * 100_000 + "\n"),
    ],
)
def test_a_deeply_nested_persona_file_is_a_clear_error_naming_it(
    tmp_path: Path, suffix: str, text: str
) -> None:
    persona = tmp_path / f"deep{suffix}"
    persona.write_text(text)
    code, out, err = run("agent", "create", "--persona", str(persona))
    assert code == 1
    assert f"deep{suffix}" in err
    assert "nested too deeply" in err
    assert "Traceback" not in err + out
    assert json.loads(ok("agent", "list", "--json")) == []


def test_chat_runs_the_plugins_tool_sources_around_its_turn(
    openai_fake: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`opencrab chat` offers the tool sources' tools as the server would, then stops them."""
    from opencrab.plugins import plugin_manager
    from tests.fakes import shelf_plugin
    from tests.fakes.shelf_plugin import Shelf

    journal: list[str] = []
    monkeypatch.setattr(shelf_plugin, "SOURCES", [Shelf("shelf", journal)])
    plugin_manager().register(shelf_plugin, name="shelf-plugin-test")
    try:
        ok("agent", "create", "--name", "aki", "--prompt", "You count things.")
        openai_fake.reply(
            CHAT,
            tool_reply(call("call_1", "shelf__count", {"item": "jam"})),
            tool_reply(call("call_2", "send_speech", {"content": "not mine to count"})),
        )
        doc = json.loads(ok("chat", "aki", "-m", "count the jam", "--json"))
    finally:
        plugin_manager().unregister(name="shelf-plugin-test")
    assert journal == ["start shelf", "stop shelf"]
    counted = doc["actions"][0]
    assert counted["name"] == "shelf__count"
    assert not counted["success"]  # offered by the source, but not granted to aki
    assert "you may not call 'shelf__count'" in json.dumps(counted)


def test_memory_index_shows_and_does_the_embedding(openai_fake: FakeLlmServer) -> None:
    ok("agent", "create", "--name", "neko")
    openai_fake.reply(CHAT, Reply(json=completion({"content": "Noted, Tama it is."})))
    ok("chat", "neko", "-m", "my cat is called Tama", "--json")
    before = json.loads(ok("memory", "index", "neko", "--json"))
    assert before["model"] == "opencrab/multilingual-e5-small"
    assert before["embedded"] == 0
    assert before["total"] >= 2
    assert before["vector_store"] == "in process (numpy, exact cosine): SQLite"
    lexical = ok("memory", "search", "neko", "what pet do I have")
    assert "lexical only: this agent's memory has no vectors yet" in lexical

    code, out, err = run("memory", "index", "neko", "--now")
    assert code == 0, err
    total = before["total"]
    assert out.strip().splitlines() == [
        f"embedded {total} of {total} with opencrab/multilingual-e5-small",
        "vectors searched in process (numpy, exact cosine): SQLite",
    ]
    hits = json.loads(ok("memory", "search", "neko", "what pet do I have", "--json"))
    assert hits[0]["content"] == "my cat is called Tama"
    assert hits[0]["legs"] == ["vector"]
    shown = ok("memory", "search", "neko", "what pet do I have")
    assert "hybrid: lexical + vector" in shown
    assert "vector" in shown
