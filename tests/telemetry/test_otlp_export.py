"""A served OpenCrab exports its turns as OpenTelemetry GenAI spans and metrics over
OTLP/HTTP to a real receiver on loopback (issue 36 §3), and sends nothing by default."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, call, chunk, completion, tool_reply
from tests.fakes.otlp_receiver import OtlpReceiver, attributes
from tests.fakes.served import ServedOpenCrab, wait_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _config(path: Path, receiver: str | None, *, capture: bool = False) -> Path:
    lines = ["[gateway.openai_compat]", "enabled = true"]
    if receiver is not None:
        lines += [
            "[telemetry]",
            f'endpoint = "{receiver}"',
            f"capture_content = {str(capture).lower()}",
            "metric_interval_secs = 3600",  # metrics come with the flush at shutdown
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _turn_with_tool_calls(served: ServedOpenCrab, llm: FakeLlmServer) -> dict[str, Any]:
    """One REST turn: a reply calling two tools (one unknown), then a plain answer."""
    llm.reply(
        CHAT,
        tool_reply(
            call("call_think", "generate_inner_voice", {"content": "greet them"}),
            call("call_bad", "no_such_tool", {}),
        ),
        Reply(
            json=completion(
                {"content": "Hello there."},
                usage={
                    "prompt_tokens": 40,
                    "completion_tokens": 4,
                    "total_tokens": 44,
                    "prompt_tokens_details": {"cached_tokens": 32},
                },
            )
        ),
    )
    with served.client() as client:
        # no heartbeat: its tick (every 29 s by default) would add a reflection's spans
        aki = {"name": "aki", "prompt": "Be brief.", "heartbeat": {"enabled": False}}
        made = client.post("/api/agents", json=aki)
        assert made.status_code == 201, made.text
        session = client.post("/api/sessions", json={"agentId": "aki"}).json()
        turn = client.post(f"/api/sessions/{session['id']}/messages", json={"content": "hi"})
        assert turn.status_code == 201, turn.text
        events = client.get(f"/api/traces/{session['id']}/events").json()
    return {"session": session, "turn": turn.json()["turn"], "events": events, "agent": made.json()}


def _streamed_turn(served: ServedOpenCrab, llm: FakeLlmServer) -> None:
    """A streamed `/v1` turn: its model call has a time to first chunk."""
    llm.reset()  # the last reply of the turn before stays queued otherwise
    llm.reply(
        CHAT,
        Reply(
            sse=[
                chunk({"role": "assistant", "content": "Str"}),
                chunk({"content": "eamed."}),
                chunk(finish="stop"),
                chunk(usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}),
                "[DONE]",
            ]
        ),
    )
    body = {"model": "aki", "messages": [{"role": "user", "content": "stream"}], "stream": True}
    with served.client() as client:
        answer = client.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        assert "eamed." in answer.text


def _by_name(spans: list[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def _has(receiver: OtlpReceiver, name: str) -> bool:
    """Whether a span of this name has come (the batch processor sends every 5 s)."""
    return any(span.name == name for span in receiver.spans())


def _low64(event_id: str) -> bytes:
    return UUID(event_id).bytes[8:]


def test_a_turn_with_tool_calls_is_exported_as_genai_spans_and_metrics(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    with OtlpReceiver() as receiver:
        config = _config(tmp_path / "opencrab.toml", receiver.url)
        served = ServedOpenCrab(
            tmp_path / "data", llm=fake_llm_server, env={"OPENCRAB_CONFIG": str(config)}
        )
        with served:
            done = _turn_with_tool_calls(served, fake_llm_server)
            _streamed_turn(served, fake_llm_server)
            # exported in the background while the server runs (batch span processor)
            wait_for(
                "two turns' spans",
                lambda: (
                    len([s for s in receiver.spans() if s.name.startswith("invoke_agent")]) == 2
                ),
            )
            told = served.output()
        assert served.returncode is not None
        spans = receiver.spans()
        metrics = {m.name: m for m in receiver.metrics()}  # flushed at shutdown

    assert f"telemetry: exporting traces to {receiver.url}/v1/traces" in told
    assert {"service.name": "opencrab"}.items() <= receiver.resources()[0].items()
    named = _by_name(spans)
    session_id = done["session"]["id"]
    trace = UUID(session_id).bytes  # a chat session is one AgentEvent trace
    events = done["events"]
    users = [e for e in events if e["type"] == "user"]
    turn = named["invoke_agent aki"][0]
    attrs = attributes(turn.attributes)
    assert turn.trace_id == trace
    assert turn.span_id == _low64(users[0]["id"])  # the span of the turn's user event
    assert turn.parent_span_id == b""
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "aki"
    assert attrs["gen_ai.agent.id"] == done["agent"]["id"]
    assert attrs["gen_ai.conversation.id"] == session_id
    assert attrs["opencrab.stopped_by"] == "message"
    assert "gen_ai.input.messages" not in attrs  # no content unless capture_content

    [chat_name] = [  # the turn's own model calls (a trace is one session)
        name
        for name, found in named.items()
        if name.startswith("chat ") and any(s.trace_id == trace for s in found)
    ]
    model = chat_name.removeprefix("chat ")  # the agent's tool_calling model
    chats = [s for s in named[chat_name] if s.trace_id == trace]
    assert len(chats) == 2
    assert all(s.parent_span_id == turn.span_id for s in chats)
    first, second = sorted(chats, key=lambda s: s.start_time_unix_nano)
    first_attrs, second_attrs = attributes(first.attributes), attributes(second.attributes)
    assert first_attrs["gen_ai.operation.name"] == "chat"
    assert first_attrs["gen_ai.provider.name"] == "openai"
    assert first_attrs["gen_ai.request.model"] == model
    assert first_attrs["gen_ai.response.model"] == "gpt-5-mini-2025-08-07"
    assert first_attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (
        first_attrs["gen_ai.usage.input_tokens"],
        first_attrs["gen_ai.usage.output_tokens"],
    ) == (
        12,
        3,
    )
    assert second_attrs["gen_ai.usage.cache_read.input_tokens"] == 32
    assert second_attrs["gen_ai.response.finish_reasons"] == ("stop",)
    usage_events = [e for e in events if e["type"] == "token_usage"]
    assert {e["metadata"]["metrics_id"] for e in usage_events} == {
        first_attrs["opencrab.metrics_id"],
        second_attrs["opencrab.metrics_id"],
    }
    assert first.kind == 3  # SPAN_KIND_CLIENT
    assert first.end_time_unix_nano > first.start_time_unix_nano

    tools = {
        attributes(s.attributes)["gen_ai.tool.name"]: s
        for s in spans
        if s.name.startswith("execute_tool")
    }
    assert set(tools) == {"generate_inner_voice", "no_such_tool"}
    actions = {a["name"]: a for a in done["turn"]["actions"]}
    for name, span in tools.items():
        tool_attrs = attributes(span.attributes)
        assert span.trace_id == trace
        assert span.parent_span_id == turn.span_id
        assert span.span_id == _low64(actions[name]["callEventId"])
        assert tool_attrs["opencrab.event.id"] == actions[name]["resultEventId"]
        assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
        assert "gen_ai.tool.call.arguments" not in tool_attrs
    assert (
        attributes(tools["generate_inner_voice"].attributes)["gen_ai.tool.call.id"] == "call_think"
    )
    bad = attributes(tools["no_such_tool"].attributes)
    assert bad["gen_ai.tool.call.id"] == "call_bad"
    assert bad["error.type"] == "tool_error"
    assert tools["no_such_tool"].status.code == 2  # STATUS_CODE_ERROR
    assert "error.type" not in attributes(tools["generate_inner_voice"].attributes)
    # the tools ran after the first call and before the second
    assert first.end_time_unix_nano <= tools["generate_inner_voice"].start_time_unix_nano
    assert tools["no_such_tool"].end_time_unix_nano <= second.start_time_unix_nano

    streamed = [s for s in named[chat_name] if s.trace_id != trace]
    assert len(streamed) == 1
    stream_attrs = attributes(streamed[0].attributes)
    assert stream_attrs["gen_ai.request.stream"] is True
    assert stream_attrs["gen_ai.response.time_to_first_chunk"] >= 0

    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    points = {
        (
            attributes(p.attributes)["gen_ai.token.type"],
            attributes(p.attributes)["gen_ai.request.model"],
        ): p
        for p in usage.histogram.data_points
    }
    assert points[("input", model)].sum == 12 + 40 + 9
    assert points[("output", model)].sum == 3 + 4 + 2
    assert points[("input", model)].count == 3
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    assert sum(p.count for p in duration.histogram.data_points) == 3
    assert all(
        attributes(p.attributes)["gen_ai.provider.name"] == "openai"
        for p in duration.histogram.data_points
    )


def test_capture_content_exports_the_messages(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    with OtlpReceiver() as receiver:
        config = _config(tmp_path / "opencrab.toml", receiver.url, capture=True)
        with ServedOpenCrab(
            tmp_path / "data", llm=fake_llm_server, env={"OPENCRAB_CONFIG": str(config)}
        ) as served:
            _turn_with_tool_calls(served, fake_llm_server)
            wait_for("the turn's spans", lambda: _has(receiver, "invoke_agent aki"))
        spans = receiver.spans()
    named = _by_name(spans)
    turn = attributes(named["invoke_agent aki"][0].attributes)
    assert '"content": "hi"' in turn["gen_ai.input.messages"]
    assert "Hello there." in turn["gen_ai.output.messages"]
    tool = attributes(named["execute_tool generate_inner_voice"][0].attributes)
    assert "greet them" in tool["gen_ai.tool.call.arguments"]
    [chat_name] = [name for name in named if name.startswith("chat ")]
    chat = attributes(named[chat_name][0].attributes)
    assert '"role": "system"' in chat["gen_ai.input.messages"]


def test_nothing_is_sent_and_no_exporter_exists_by_default(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    with OtlpReceiver() as receiver:
        config = _config(tmp_path / "opencrab.toml", None)
        # the receiver listens where a default collector would; the server is not told
        served = ServedOpenCrab(
            tmp_path / "data", llm=fake_llm_server, env={"OPENCRAB_CONFIG": str(config)}
        )
        with served:
            _turn_with_tool_calls(served, fake_llm_server)
            output = served.output()
        assert receiver.requests == []
    assert "telemetry: exporting" not in output
    # the export's modules (and so the SDK and its exporters) are never imported
    probe = (
        "import sys, asyncio\n"
        "from opencrab.config import load_settings\n"
        "from opencrab.core.runtime import Runtime\n"
        "from opencrab.process import Role, running\n"
        "async def main():\n"
        "    async with Runtime.open(load_settings()) as runtime:\n"
        "        async with running(Role.WORKER, runtime) as process:\n"
        "            assert process.telemetry is None\n"
        "    loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk',"
        " 'opentelemetry.exporter', 'opencrab.telemetry.export'))]\n"
        "    print('loaded:', loaded)\n"
        "asyncio.run(main())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env={**served.env, "OPENCRAB_HOME": str(tmp_path / "probe")},
    )
    assert ran.returncode == 0, ran.stderr
    assert "loaded: []" in ran.stdout


def test_tickets_and_imports_are_spans_of_their_own(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURES / "codex" / "localpush-2026-02-23", corpus)
    fake_llm_server.reply(CHAT, tool_reply(call("c1", "complete_ticket", {"summary": "Done."})))
    with OtlpReceiver() as receiver:
        config = _config(tmp_path / "opencrab.toml", receiver.url)
        served = ServedOpenCrab(
            tmp_path / "data", llm=fake_llm_server, env={"OPENCRAB_CONFIG": str(config)}
        )
        with served, served.client() as client:
            agent = client.post("/api/agents", json={"name": "aki", "prompt": "Work."}).json()
            made = client.post(
                "/api/tickets", json={"agentId": agent["id"], "context": {"goal": "ship"}}
            )
            assert made.status_code == 201, made.text
            ticket_id = made.json()["id"]
            wait_for(
                "the ticket to complete",
                lambda: client.get(f"/api/tickets/{ticket_id}").json()["status"] == "completed",
            )
            job = client.post("/api/imports", json={"path": str(corpus), "source": "codex"})
            assert job.status_code == 202, job.text
            job_id = job.json()["id"]
            wait_for(
                "the import job",
                lambda: client.get(f"/api/imports/jobs/{job_id}").json()["status"] == "done",
            )
            ticket = client.get(f"/api/tickets/{ticket_id}").json()
            wait_for(
                "the ticket's and the import's spans",
                lambda: _has(receiver, f"ticket {ticket_id}") and _has(receiver, "import codex"),
            )
        spans = receiver.spans()
    named = _by_name(spans)
    (ticket_span,) = named[f"ticket {ticket_id}"]
    session_id = ticket["currentSessionId"] or ticket["sessions"][-1]["id"]
    assert ticket_span.trace_id == UUID(session_id).bytes  # the ticket session's trace
    ticket_attrs = attributes(ticket_span.attributes)
    assert ticket_attrs["opencrab.work.kind"] == "ticket"
    assert ticket_attrs["opencrab.ticket.agent_id"] == agent["id"]
    assert ticket_attrs["opencrab.ticket.turns"] == 1
    (turn,) = named["invoke_agent aki"]
    assert turn.trace_id == ticket_span.trace_id
    assert turn.parent_span_id == ticket_span.span_id  # the ticket's turn hangs below it
    assert attributes(turn.attributes)["opencrab.session.kind"] == "ticket"
    (done,) = named["execute_tool complete_ticket"]
    assert done.parent_span_id == turn.span_id
    (imported,) = named["import codex"]
    import_attrs = attributes(imported.attributes)
    assert import_attrs["opencrab.import.files"] >= 1
    assert import_attrs["opencrab.import.messages"] > 0
    assert imported.end_time_unix_nano >= imported.start_time_unix_nano
