"""Request limits on a real `opencrab up` (issue 31, "Also" 3): a huge body is refused with
413 before it is read, with or without a Content-Length, and the server does not grow;
an upload is held to its workspace quota instead; ticket params are capped; one client
keeps at most 16 WebSockets open."""

from __future__ import annotations

import contextlib
import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab
from tests.server.conftest import error_of, new_agent

MiB = 1024 * 1024
HUGE = 100 * MiB


def status(pid: int, field: str) -> int:
    """A size from /proc/PID/status, in bytes (VmRSS: resident now; VmHWM: its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def json_body(size: int) -> Iterator[bytes]:
    """A JSON object of `size` bytes (an agent whose prompt is huge), in 1 MiB pieces."""
    head, tail = b'{"name": "big", "prompt": "', b'"}'
    left = size - len(head) - len(tail)
    yield head
    while left > 0:
        piece = min(left, MiB)
        yield b"x" * piece
        left -= piece
    yield tail


def chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """`pieces` in HTTP/1.1 chunked transfer coding."""
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def post_raw(
    port: int,
    path: str,
    headers: dict[str, str],
    body: Iterator[bytes],
    *,
    method: str = "POST",
) -> bytes:
    """A request over a plain socket, sending `body` until the server answers or stops
    reading; the response as received (up to the end of its body or the connection)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        for piece in body:
            if select.select([sock], [], [], 0)[0]:
                break  # it answered already
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break  # it answered and closed
        received = b""
        while b"\r\n\r\n" not in received or not _complete(received):
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            received += data
        return received


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def answer_of(response: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), response[:200]
    return int(head.split()[1]), json.loads(body)


@pytest.fixture
def served(data_dir: Path, fake_llm_server: FakeLlmServer) -> Iterator[ServedOpenCrab]:
    env = {"OPENCRAB_AGENT__MAX_WORKSPACE_SIZE_MB": "4"}  # a workspace quota of 4 MB
    with ServedOpenCrab(data_dir, llm=fake_llm_server, env=env) as server:
        yield server


def test_a_huge_body_is_refused_before_it_is_read_and_the_server_does_not_grow(
    served: ServedOpenCrab,
) -> None:
    def ways(size: int) -> list[tuple[dict[str, str], Iterator[bytes]]]:
        """A JSON body of `size` bytes sent with its Content-Length, and sent chunked."""
        json_type = {"Content-Type": "application/json", **served.headers}
        return [
            ({**json_type, "Content-Length": str(size)}, json_body(size)),
            ({**json_type, "Transfer-Encoding": "chunked"}, chunked(json_body(size))),
        ]

    for headers, body in ways(2 * MiB):  # so that what a refusal loads is loaded
        code, _ = answer_of(post_raw(served.port, "/api/agents", headers, body))
        assert code == 413
    peak_before = status(served.pid, "VmHWM")
    resident_before = status(served.pid, "VmRSS")

    for headers, body in ways(HUGE):
        code, error = answer_of(post_raw(served.port, "/api/agents", headers, body))
        assert code == 413, error
        assert error == {
            "error": "payload_too_large",
            "message": "the request body is over the limit of 1048576 bytes "
            "([gateway.rest] max_body_kb)",
        }

    grown = status(served.pid, "VmHWM") - peak_before
    assert grown < 8 * MiB, f"the server's peak grew by {grown / MiB:.1f} MiB"
    assert status(served.pid, "VmRSS") - resident_before < 8 * MiB
    with served.client() as client:
        assert client.get("/api/agents").json() == []  # nothing of them was stored


def test_an_upload_is_held_to_its_workspace_quota_not_the_body_limit(
    served: ServedOpenCrab,
) -> None:
    with served.client() as client:
        made = client.post("/api/agents", json={"name": "keeper", "prompt": "Keep files."})
        assert made.status_code == 201, made.text
        files = f"/api/agents/{made.json()['id']}/workspace"
        two = b"u" * (2 * MiB)  # over max_body_kb, within the quota
        put = client.put(f"{files}/data.bin", content=two)
        assert put.status_code == 201, put.text
        assert client.get(f"{files}/data.bin").content == two

        def over() -> Iterator[bytes]:  # streamed, no length: counted as it arrives
            for _ in range(6):
                yield b"v" * MiB

        refused = client.put(f"{files}/big.bin", content=over())
        assert refused.status_code == 413, refused.text
        assert "quota" in refused.json()["message"]
        code, error = answer_of(
            post_raw(
                served.port,
                f"{files}/big.bin",
                {"Content-Length": str(HUGE), **served.headers},
                iter([b"w" * MiB] * 100),
                method="PUT",
            )
        )
        assert code == 413, error
        assert client.get(f"{files}/big.bin").status_code == 404
        assert client.get(f"{files}/data.bin").content == two  # nothing lost


def test_ticket_params_over_the_cap_are_refused_naming_params(client: TestClient) -> None:
    agent = new_agent(client, "worker")
    big = {"agentId": agent["id"], "params": {"blob": "p" * (70 * 1024)}}
    message = error_of(client.post("/api/tickets", json=big), 400, "validation_error")
    assert message.startswith("params is 71")
    assert "over the limit of 65536 bytes" in message

    deep: dict[str, object] = {}
    for _ in range(20):
        deep = {"in": deep}
    nested = {"agentId": agent["id"], "params": deep}
    message = error_of(client.post("/api/tickets", json=nested), 400, "validation_error")
    assert message == "params nests deeper than 16 levels of objects and lists"
    context = {"agentId": agent["id"], "context": {"goal": "g" * (70 * 1024)}}
    refused = client.post("/api/tickets", json=context)
    assert error_of(refused, 400, "validation_error").startswith("context is 71")
    assert client.get("/api/tickets").json() == []

    fine = {"agentId": agent["id"], "params": {"repo": "x", "deep": {"a": {"b": [1, 2]}}}}
    assert client.post("/api/tickets", json=fine).status_code == 201


def test_the_17th_websocket_of_one_client_is_closed_with_a_reason(
    served: ServedOpenCrab,
) -> None:
    url = f"ws://127.0.0.1:{served.port}/api/ws"
    with contextlib.ExitStack() as sockets:
        opened = [sockets.enter_context(open_socket(served, url)) for _ in range(16)]
        for ws in opened:
            ws.send(json.dumps({"type": "ping"}))
            assert json.loads(ws.recv(timeout=60)) == {"type": "pong"}
        with open_socket(served, url) as extra, pytest.raises(ConnectionClosed) as closed:
            extra.recv(timeout=60)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 4429
        assert closed.value.rcvd.reason == (
            "too many WebSockets open from this client (at most 16: "
            "[gateway.rest] ws_max_per_client)"
        )
        opened[0].close()  # one goes: room for another
        for _ in range(100):  # once the server has seen it go (it may take a moment)
            with open_socket(served, url) as again:
                again.send(json.dumps({"type": "ping"}))
                with contextlib.suppress(ConnectionClosed):
                    assert json.loads(again.recv(timeout=60)) == {"type": "pong"}
                    break
        else:
            raise AssertionError("no room for a WebSocket after one was closed")


def open_socket(served: ServedOpenCrab, url: str) -> ClientConnection:
    """A WebSocket to the served server with its token (a context manager: closed on the
    way out); all of them count against that one token."""
    return connect(url, open_timeout=60, additional_headers=served.headers)
