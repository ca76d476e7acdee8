"""`opencrab up` as a user runs it: a real process on a real socket, stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from uuid import uuid4

from opencrab.events import event_json
from tests.test_event_log import chain


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
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
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = get(f"{base}/api/health")
                break
            except OSError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "server did not start in 30 s"
                time.sleep(0.1)
        assert status == 200
        assert isinstance(body, dict)
        assert body["status"] == "ok"
        status, body = get(f"{base}/api/traces/{events[0].trace_id}/events")
        assert status == 200
        assert isinstance(body, list)
        assert [e["id"] for e in body] == [str(e.id) for e in events]
        status, body = get(f"{base}/api/traces/{uuid4()}/events")
        assert status == 404
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so supervisors see it
    assert server.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
