"""`opencrab up` as a user runs it: a real process on a real socket, stopped by SIGTERM.

The whole-server test binds a non-loopback address (so a bearer token is required),
thinks through the fake OpenAI server, and is driven the way clients would: httpx for
REST, a websockets client for /api/ws, the official openai client for /v1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from uuid import uuid4

import httpx
import openai
import pytest
from websockets.sync.client import connect

from opencrab.events import event_json
from tests.fakes.event_chain import chain
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import CHAT, call, chunk, completion, tool_reply
from tests.fakes.ports import closed_port, free_port
from tests.fakes.served import START_SECS, create_token, start_up, stop_up


def get(url: str, token: str = "") -> tuple[int, object]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_up_serves_health_and_traces_then_stops_cleanly(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "opencrab")
    data = tmp_path / "served"
    events = chain(uuid4())
    file = tmp_path / "events.jsonl"
    file.write_bytes(b"\n".join(event_json(e) for e in events))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    subprocess.run(
        [exe, "events", "import", str(file), "--data-dir", str(data)], check=True, env=env
    )
    token = create_token(data, env, "tests")  # as root, `up` needs one even on loopback
    port = free_port()
    server = subprocess.Popen(
        [exe, "up", "--port", str(port), "--data-dir", str(data)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_SECS
        while True:
            try:
                status, body = get(f"{base}/api/health")
                break
            except OSError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, f"server did not start in {START_SECS} s"
                time.sleep(0.1)
        assert status == 200
        assert isinstance(body, dict)
        assert body["status"] == "ok"
        status, body = get(f"{base}/api/traces/{events[0].trace_id}/events", token)
        assert status == 200
        assert isinstance(body, list)
        assert [e["id"] for e in body] == [str(e.id) for e in events]
        status, body = get(f"{base}/api/traces/{uuid4()}/events", token)
        assert status == 404
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so supervisors see it
    assert server.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output


# ------------------------------------------------------------------ the whole server


def test_up_off_loopback_with_a_token_serves_rest_websocket_and_v1(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    exe = str(Path(sys.executable).parent / "opencrab")
    data = tmp_path / "served"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    closed = f"http://127.0.0.1:{closed_port()}"
    env.update(
        OPENAI_API_KEY="sk-test",
        OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL=fake_llm_server.url + "/v1",
        OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL=closed,
        OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL=closed,
        OPENCRAB_GATEWAY__OPENAI_COMPAT__ENABLED="true",
    )
    port = free_port()
    refused = subprocess.run(
        [exe, "up", "--host", "0.0.0.0", "--port", str(port), "--data-dir", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "needs bearer tokens" in refused.stderr
    made = subprocess.run(
        [exe, "token", "create", "ci", "--json", "--data-dir", str(data)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    secret = json.loads(made.stdout)["token"]
    base = f"http://127.0.0.1:{port}"
    server = start_up(
        ["--host", "0.0.0.0", "--port", str(port), "--data-dir", str(data)], env, base
    )
    try:
        assert httpx.get(f"{base}/api/agents", timeout=60).status_code == 401
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"})
        agent = api.post("/api/agents", json={"name": "aki", "prompt": "Be brief."}).json()
        session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]

        fake_llm_server.reply(
            CHAT,
            tool_reply(call("c1", "ws_write", {"path": "plan.md", "content": "water"})),
            tool_reply(call("c2", "send_speech", {"content": "Planned."})),
        )
        ws_url = f"ws://127.0.0.1:{port}/api/ws?access_token={secret}"
        with connect(ws_url) as ws, ThreadPoolExecutor(1) as pool:
            ws.send(json.dumps({"type": "subscribe", "sessionId": session}))
            assert json.loads(ws.recv(10))["type"] == "subscribed"
            posted = pool.submit(
                api.post, f"/api/sessions/{session}/messages", json={"content": "Plan it"}
            )
            seen: list[str] = []
            while "message" not in seen:
                message = json.loads(ws.recv(30))
                assert message["sessionId"] == session
                seen.append(message["event"]["type"])
            turn = posted.result(30).json()
        assert turn["turn"]["reply"]["content"] == "Planned."
        assert seen[:2] == ["user", "tool_call"]
        assert "tool_result" in seen
        assert api.get(f"/api/agents/{agent['id']}/workspace/plan.md").content == b"water"

        for _ in range(50):  # the metrics recorder writes in the background
            metrics = api.get(f"/api/agents/{agent['id']}/llm/metrics").json()
            if len(metrics) >= 2:
                break
            time.sleep(0.1)
        assert [m["provider"] for m in metrics] == ["openai", "openai"]

        client = openai.OpenAI(base_url=f"{base}/v1", api_key=secret, max_retries=0)
        fake_llm_server.reset()  # the last reply of a queue otherwise repeats
        fake_llm_server.reply(CHAT, Reply(json=completion({"content": "Hello from aki."})))
        answer = client.chat.completions.create(
            model="aki", messages=[{"role": "user", "content": "Hi"}]
        )
        assert answer.choices[0].message.content == "Hello from aki."
        fake_llm_server.reset()
        fake_llm_server.reply(
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
        stream = client.chat.completions.create(
            model="aki", messages=[{"role": "user", "content": "Again"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello!"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{base}/v1", api_key="ocb_wrong", max_retries=0).models.list()
    finally:
        output = stop_up(server)
    assert "bearer token required" in " ".join(output.split())


def test_up_without_rest_serves_no_http_but_runs_the_heartbeat(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "opencrab")
    data = tmp_path / "headless"
    persona = tmp_path / "quick.toml"
    persona.write_text('name = "quick"\n[heartbeat]\ninterval_secs = 1\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    env["OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    env["OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    subprocess.run(
        [exe, "agent", "create", "--persona", str(persona), "--data-dir", str(data)],
        check=True,
        env=env,
        capture_output=True,
    )
    env["OPENCRAB_GATEWAY__REST__ENABLED"] = "false"
    port = free_port()
    server = subprocess.Popen(
        [exe, "up", "--port", str(port), "--data-dir", str(data)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _heartbeat_rows(data / "opencrab.db"):  # the heartbeat ticks and logs
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            assert time.monotonic() < deadline, "no heartbeat within 60 s"
            time.sleep(0.2)
        with pytest.raises(ConnectionRefusedError):  # and nothing listens on the REST port
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output
    said = " ".join(output.split())  # as printed, wrapped at the terminal's width
    assert "without HTTP ([gateway.rest] enabled = false)" in said
    assert "stopped" in output


def test_up_names_the_setting_of_a_dashboard_port_in_use(tmp_path: Path) -> None:
    """The note for a second dashboard port that is taken names its setting (a Rich
    console once took `[dashboard]` for a style tag and printed "( port)")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env["OPENCRAB_DASHBOARD__PORT"] = str(taken.getsockname()[1])
        create_token(tmp_path / "data", env, "tests")  # as root, `up` needs one
        port = free_port()
        server = start_up(
            ["--port", str(port), "--data-dir", str(tmp_path / "data")],
            env,
            f"http://127.0.0.1:{port}",
        )
        output = stop_up(server)
    said = " ".join(output.split())
    assert f"the dashboard is not also on port {env['OPENCRAB_DASHBOARD__PORT']}" in said
    assert "([dashboard] port):" in said


def _heartbeat_rows(db_file: Path) -> int:
    if not db_file.exists():
        return 0
    with closing(sqlite3.connect(db_file, timeout=5)) as conn:
        return int(conn.execute("SELECT count(*) FROM heartbeat_log").fetchone()[0])
