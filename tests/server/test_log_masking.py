"""Bearer tokens never reach the server's log lines, and a WebSocket can keep its token out
of the URL altogether (a `opencrab.bearer.<token>` subprotocol).

A real `opencrab up` that requires tokens is asked the ways clients ask: a URL with
`?access_token=` (accepted on a WebSocket, refused on plain HTTP and with a wrong token),
the Authorization header, and the subprotocol; everything it printed is then searched.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from opencrab.server.log_masking import MaskTokens, mask_tokens
from tests.fakes.ports import closed_port, free_port
from tests.fakes.served import start_up, stop_up


def test_no_token_reaches_the_log_of_a_real_server(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "opencrab")
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    env["OPENCRAB_GATEWAY__REST__REQUIRE_TOKEN"] = "true"  # a token, whoever runs the test
    closed = f"http://127.0.0.1:{closed_port()}"  # no model is loaded or looked for
    env.update(OPENAI_API_KEY="sk-test", OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL=closed)
    env["OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    env["OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL"] = f"http://127.0.0.1:{closed_port()}"
    made = subprocess.run(
        [exe, "token", "create", "logs", "--json", "--data-dir", str(data)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    secret = json.loads(made.stdout)["token"]
    wrong = "ocb_" + secrets.token_urlsafe(32)
    port = free_port()
    env["OPENCRAB_DASHBOARD__PORT"] = str(port)
    base = f"http://127.0.0.1:{port}"
    ws = f"ws://127.0.0.1:{port}/api/ws"
    server = start_up(["--port", str(port), "--data-dir", str(data)], env, base)
    try:
        # plain HTTP takes no token from the URL: refused, and logged
        refused = httpx.get(f"{base}/api/agents?access_token={secret}", timeout=60)
        assert refused.status_code == 401
        bearer = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{base}/api/agents", headers=bearer, timeout=60).status_code == 200
        assert httpx.get(f"{base}/api/agents?x={wrong}", timeout=60).status_code == 401

        with connect(f"{ws}?access_token={secret}", open_timeout=60) as accepted:
            accepted.send(json.dumps({"type": "ping"}))
            assert json.loads(accepted.recv(30))["type"] == "pong"
        with pytest.raises(InvalidStatus) as closed:
            connect(f"{ws}?access_token={wrong}", open_timeout=60)
        assert closed.value.response.status_code == 403

        offered = [f"opencrab.bearer.{secret}", "opencrab"]
        with connect(ws, subprotocols=offered, open_timeout=60) as by_protocol:  # type: ignore[arg-type]
            assert by_protocol.subprotocol == "opencrab"
            answer = by_protocol.response
            assert answer is not None
            assert answer.headers["Sec-WebSocket-Protocol"] == "opencrab"
            assert secret not in str(answer.headers)
            by_protocol.send(json.dumps({"type": "ping"}))
            assert json.loads(by_protocol.recv(30))["type"] == "pong"
        with pytest.raises(InvalidStatus):  # a wrong token in the subprotocol is refused
            connect(ws, subprotocols=[f"opencrab.bearer.{wrong}", "opencrab"], open_timeout=60)  # type: ignore[list-item]
    finally:
        output = stop_up(server)
    assert secret not in output
    assert secret[4:] not in output
    assert wrong not in output
    assert wrong[4:] not in output
    # the lines are there, masked: the requests above were logged, accepted and refused
    assert '"GET /api/agents?access_token=*** HTTP/1.1" 401' in output
    assert '"WebSocket /api/ws?access_token=***" [accepted]' in output
    assert '"WebSocket /api/ws?access_token=***" 403' in output
    assert "/api/agents?x=ocb_***" in output


def test_a_log_record_keeps_its_arguments_masked_in_place() -> None:
    """uvicorn's access formatter reads the record's arguments one by one: the filter
    masks them in place (a URL, an exception text, a traceback), numbers stay numbers."""
    token = "ocb_" + secrets.token_urlsafe(32)
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/api/ws?a=1&access_token={token}&b=2", "1.1", 401),
        None,
    )
    assert MaskTokens().filter(record)
    assert record.args == ("127.0.0.1:5", "GET", "/api/ws?a=1&access_token=***&b=2", "1.1", 401)
    try:
        raise ValueError(f"bad header Bearer {token}")
    except ValueError:
        failed = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "%s", (ValueError(token),), None
        )
        failed.exc_info = sys.exc_info()
    MaskTokens().filter(failed)
    assert token not in failed.getMessage()
    assert failed.exc_text is not None
    assert token not in failed.exc_text
    assert "Bearer ocb_***" in failed.exc_text
    assert mask_tokens("nothing to hide") == "nothing to hide"
    assert mask_tokens("access_token=ocb%5Fabc") == "access_token=***"
    assert mask_tokens("ocb%5Fabc-def") == "ocb_***"
