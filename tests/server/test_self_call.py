"""OpenCrab never calls itself as a model: seed 001 puts the REST gateway and the llama.cpp
provider both on localhost:8080. A real server (with `/v1` on) marks every response with
its instance id, refuses requests carrying its own mark, and routers and `llm health`
refuse a provider whose server answers with a mark."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.config import Settings, load_settings
from opencrab.errors import ProviderNotConfigured
from opencrab.instance import INSTANCE_HEADER, INSTANCE_ID
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatRequest, Message
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics, sessions
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import chunk, completion
from tests.fakes.ports import closed_port, free_port
from tests.fakes.served import create_token, start_up, stop_up
from tests.fakes.threaded_server import serve_in_thread

CHAT = "/v1/chat/completions"


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def self_pointing(
    port: int, fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """`/v1` on, llama.cpp pointed at this very server, OpenAI answered by the fake."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv(
        "OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", f"http://127.0.0.1:{closed_port()}"
    )
    monkeypatch.setenv("OPENCRAB_GATEWAY__OPENAI_COMPAT__ENABLED", "true")
    return load_settings()


@pytest.fixture
def served(self_pointing: Settings, port: int) -> Iterator[tuple[str, Database]]:
    """The app on a real socket in this process (so it shares this process's mark)."""
    db = Database(self_pointing.database_url)
    db.upgrade()
    with serve_in_thread(create_app(self_pointing, db), port) as url:
        yield url, Database(self_pointing.database_url)


def test_every_response_carries_the_mark_and_own_requests_are_refused(
    served: tuple[str, Database], fake_llm_server: FakeLlmServer
) -> None:
    base, db = served
    with httpx.Client(base_url=base, timeout=60) as api:  # a busy machine is slow, not wrong
        assert api.get("/api/health").headers[INSTANCE_HEADER] == INSTANCE_ID
        missing = api.get("/api/no-such-route")
        assert missing.status_code == 404
        assert missing.headers[INSTANCE_HEADER] == INSTANCE_ID
        assert api.get("/v1/models").headers[INSTANCE_HEADER] == INSTANCE_ID
        assert api.post("/api/agents", json={"name": "aki", "prompt": "Hi."}).status_code == 201
        fake_llm_server.reply(
            CHAT,
            Reply(sse=[chunk({"content": "Hello"}), chunk(finish="stop"), "[DONE]"]),
        )
        body = {"model": "aki", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
        with api.stream("POST", "/v1/chat/completions", json=body) as stream:
            assert stream.headers[INSTANCE_HEADER] == INSTANCE_ID
            assert "Hello" in "".join(stream.iter_text())
        with db.read() as conn:
            turns_before = conn.execute(sa.select(sa.func.count()).select_from(sessions)).scalar()

        # a request with this process's own mark is OpenCrab calling itself: nothing runs
        own = api.post("/v1/chat/completions", json=body, headers={INSTANCE_HEADER: INSTANCE_ID})
        assert own.status_code == 508
        assert own.json()["error"] == "self_call"
        assert own.headers[INSTANCE_HEADER] == INSTANCE_ID
        with db.read() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(sessions)).scalar() == (
                turns_before
            )


async def test_the_router_refuses_llamacpp_when_it_is_this_server(
    served: tuple[str, Database],
    self_pointing: Settings,
    fake_llm_server: FakeLlmServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    base, db = served
    expected = f"llamacpp at {base} is this OpenCrab server; set [llm.providers.llamacpp] base_url"
    fake_llm_server.reply(CHAT, Reply(json=completion({"content": "from openai"})))
    recorder = MetricsRecorder(db)
    router = LlmRouter.from_settings(self_pointing, metrics=recorder)
    try:
        # asked for llamacpp before any health check: refused on its answer, and the
        # call falls back to the next provider instead of running an agent inside
        reply = await router.chat(ChatRequest(model="llamacpp/any", messages=[Message.user("x")]))
        assert reply.text == "from openai"
        assert router.providers["llamacpp"].refused == expected
        await recorder.flush()
        with db.read() as conn:
            rows = conn.execute(
                sa.select(
                    llm_usage_metrics.c.provider,
                    llm_usage_metrics.c.status,
                    llm_usage_metrics.c.error_type,
                    llm_usage_metrics.c.error,
                ).order_by(llm_usage_metrics.c.attempt)
            ).all()
            assert conn.execute(sa.select(sa.func.count()).select_from(sessions)).scalar() == 0
        assert [(r.provider, r.status, r.error_type) for r in rows] == [
            ("llamacpp", "error", "self_call"),
            ("openai", "ok", None),
        ]
        assert rows[0].error == expected
        # from then on it is never called again
        with pytest.raises(ProviderNotConfigured, match=expected.replace("[", r"\[")):
            await router.chat_with_provider("llamacpp", ChatRequest(model="x", messages=[]))
    finally:
        await recorder.aclose()
        await router.aclose()

    # llama.cpp is not used (OpenAI is the default and answers): it is not asked at all
    before = len(caplog.records)
    unused = LlmRouter.from_settings(self_pointing)
    try:
        await unused.start()
        assert unused.providers["llamacpp"].refused is None
        assert unused.notice is None
        assert unused.default.provider == "openai"
    finally:
        await unused.aclose()

    # the default: the health check already sees the mark, told once (in the notice the
    # caller shows, not also as a warning of its own)
    used = self_pointing.model_copy(deep=True)
    used.llm.default_provider = "llamacpp"
    started = LlmRouter.from_settings(used)
    try:
        await started.start()
        assert started.usable is not None
        assert "llamacpp" not in started.usable
        assert started.notice is not None
        assert started.notice.count(expected) == 1
        told = [r for r in caplog.records[before:] if expected in r.getMessage()]
        assert [r.levelname for r in told if r.levelno >= logging.WARNING] == []
    finally:
        await started.aclose()


def test_llm_health_reports_a_running_opencrab_as_not_a_model_server(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "opencrab.toml"
    config.write_text(
        "[gateway.openai_compat]\nenabled = true\n"
        f'[llm.providers.llamacpp]\nbase_url = "{base}"\n'
        f'[llm.providers.ollama]\nbase_url = "http://127.0.0.1:{closed_port()}"\n'
    )
    data = tmp_path / "served"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCRAB_")}
    args = ["--port", str(port), "--data-dir", str(data), "--config", str(config)]
    create_token(data, env, "tests")  # as root, `up` needs one even on loopback
    server = start_up(args, env, base)
    try:
        mark = httpx.get(f"{base}/api/health", timeout=60).headers[INSTANCE_HEADER]
        assert mark != INSTANCE_ID  # another process, another mark
        result = CliRunner().invoke(
            build_app(),
            ["llm", "health", "--json", "--config", str(config), "--data-dir", str(data)],
        )
        assert result.exit_code == 0, result.output
        llamacpp = next(r for r in json.loads(result.stdout) if r["provider"] == "llamacpp")
        assert llamacpp["healthy"] is False
        assert llamacpp["note"] == (
            f"llamacpp at {base} is an OpenCrab server (instance {mark}), not a model server; "
            "set [llm.providers.llamacpp] base_url"
        )
    finally:
        stop_up(server)
