"""A llama.cpp server (`llama-server`) through its OpenAI-compatible API at `<base_url>/v1`.

- `base_url` is the server's root (default http://localhost:8080); a trailing `/v1` is
  accepted too.
- No key is needed: a placeholder is sent unless one is configured (for servers started
  with `--api-key`), so the provider always counts as configured.
- `max_tokens` keeps its name, which every llama-server version understands.
- Health is `GET /health` (200 once the model is loaded, 503 while loading); servers
  without it are asked for `/v1/models` instead.
- Models come from `/v1/models`; `meta.n_ctx_train` (the context the model was trained
  for; the server may run a smaller one) is reported as the context window.
- Streams: recent `llama-server` builds send usage on the last chunk when asked, but
  llama-cpp-python's server and older builds send none. Then the provider counts it
  itself, so budgets and metrics never see a free call: output tokens are the streamed
  deltas (llama.cpp streams one token per chunk), input tokens come from the server's
  tokenizer (`/extras/tokenize/count` on llama-cpp-python, `/tokenize` on llama-server)
  over the messages' text, or about four characters a token if neither answers. Such
  usage carries `raw = {"estimated": true, "method": ...}`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from opencrab.config.providers import Price, ProviderFacts
from opencrab.llm.providers.openai import OpenAIOptions, OpenAIProvider
from opencrab.llm.types import ChatChunk, ChatRequest, ModelInfo, Usage

log = logging.getLogger(__name__)

DEFAULT_URL = "http://localhost:8080"
PLACEHOLDER_KEY = "sk-no-key-required"
CHARS_PER_TOKEN = 4  # the fallback estimate when the server cannot tokenize


class LlamaCppProvider(OpenAIProvider):
    """The model a local llama.cpp server has loaded."""

    name = "llamacpp"
    # no key from the dashboard or a variable (a server's --api-key goes in the config)
    facts = ProviderFacts(
        local=True,
        prices=(Price("*", 0.0, 0.0),),  # runs on your own machine
        options=OpenAIOptions,
        libraries=("openai",),
        extra="openai",
    )
    max_tokens_param: ClassVar[str] = "max_tokens"
    azure_capable: ClassVar[bool] = False

    def root_url(self) -> str:
        """The server's root URL, without `/v1`."""
        root = (self.config.base_url or DEFAULT_URL).rstrip("/")
        return root.removesuffix("/v1")

    def base_url(self) -> str:
        """The OpenAI-compatible API under the root."""
        return f"{self.root_url()}/v1"

    def client_api_key(self) -> str:
        """The configured key, else a placeholder the server ignores."""
        key = self.config.api_key
        return key.get_secret_value() if key and key.get_secret_value() else PLACEHOLDER_KEY

    def is_configured(self) -> bool:
        """Always: the server needs no key and has a default URL."""
        return True

    def model_info(self, raw: dict[str, Any]) -> ModelInfo:
        """A ModelInfo from a `/v1/models` entry."""
        meta = raw.get("meta") or {}
        window = meta.get("n_ctx_train") if isinstance(meta, dict) else None
        return ModelInfo(
            id=str(raw["id"]),
            provider=self.name,
            context_window=window if isinstance(window, int) and window > 0 else None,
        )

    async def health_check(self) -> bool:
        """True when `/health` says the model is loaded; never raises."""
        import openai

        timeout = min(self.health_timeout_secs, self.config.timeout_secs)
        try:
            async with asyncio.timeout(timeout):
                await self.client().get(
                    f"{self.root_url()}/health", cast_to=object, options={"timeout": timeout}
                )
        except openai.NotFoundError:
            return await super().health_check()
        except Exception:
            return False
        return True

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The streamed reply; usage is counted here when the server sends none."""
        deltas = 0
        usage_seen = False
        async for chunk in super().chat_completion_stream(request):
            usage_seen = usage_seen or chunk.usage is not None
            if chunk.text or chunk.reasoning or chunk.tool_calls:
                deltas += 1
            yield chunk
        if not usage_seen:
            prompt, method = await self.count_prompt_tokens(request)
            raw = {"estimated": True, "method": method, "streamed_deltas": deltas}
            yield ChatChunk(usage=Usage.of(prompt, deltas, raw=raw), model=request.model)

    async def count_prompt_tokens(self, request: ChatRequest) -> tuple[int, str]:
        """The prompt's token count by the server's tokenizer, else estimated from its length.

        The text is the messages' text without the chat template, so the count is a
        little under what the server evaluated; it is never zero for a non-empty prompt.
        """
        text = "\n".join(message.text for message in request.messages)
        timeout = min(self.health_timeout_secs, self.config.timeout_secs)
        root = self.root_url()
        attempts: list[tuple[str, str, dict[str, Any]]] = [
            ("extras/tokenize/count", "count", {"input": text, "model": request.model}),
            ("tokenize", "tokens", {"content": text}),
        ]
        for path, key, body in attempts:
            try:
                async with asyncio.timeout(timeout):
                    answer = await self.client().post(
                        f"{root}/{path}", cast_to=object, body=body, options={"timeout": timeout}
                    )
            except Exception as exc:  # a missing route or a server that cannot tokenize
                log.debug("llamacpp: %s did not count the prompt: %s", path, exc)
                continue
            value = answer.get(key) if isinstance(answer, dict) else None
            if isinstance(value, int) and value >= 0:
                return value, path
            if isinstance(value, list):
                return len(value), path
        return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN, "characters"
