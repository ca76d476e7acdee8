"""The provider interface (seed 001 `LlmProvider`) and how providers are registered.

A provider is one small class per vendor that declares its own facts (`facts`: key
variable, base URL or not, local or not, default prices, its options model; see
opencrab.config.providers). Third parties add providers through the
`register_providers` plugin hook, exactly like the built-ins, importing only from
`opencrab.ext`:

    from opencrab.ext import LlmProvider, Price, ProviderFacts, ProviderOptions, hookimpl

    class EchoOptions(ProviderOptions):
        greeting: str = "hello"

    class EchoProvider(LlmProvider):
        name = "echo"
        facts = ProviderFacts(
            key_env="ECHO_API_KEY", prices=(Price("echo-1", 0.5, 1.0),), options=EchoOptions
        )
        ...  # available_models, chat_completion, chat_completion_stream, health_check

    @hookimpl
    def register_providers(register):
        register(EchoProvider)   # built as EchoProvider(config: ProviderConfig, name="echo")

`[llm.providers.echo]` then configures it (`greeting = "hi"` is checked by EchoOptions,
read as `self.options.greeting`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import ProviderFacts, ProviderOptions
from opencrab.errors import ProviderNotConfigured
from opencrab.instance import event_hooks
from opencrab.llm.reply_cap import DEFAULT_MAX_REPLY_BYTES, reply_cap_hook
from opencrab.llm.types import ChatChunk, ChatRequest, ChatResponse, ModelInfo

ProviderFactory = Callable[..., "LlmProvider"]
"""Called as `factory(config, name=name)`; returns a provider."""


class LlmProvider(ABC):
    """One LLM vendor behind the neutral types.

    Implementations map requests, replies, streams, usage, finish reasons and errors
    (raising `opencrab.errors.LlmError` subclasses, never SDK exceptions) and turn SDK
    retries off: the router is the one retry and fallback loop.
    """

    name: str
    facts: ClassVar[ProviderFacts]
    """What the provider declares about itself; every provider class sets its own."""
    options: ProviderOptions
    """Its own settings from `[llm.providers.<name>]`, as `facts.options` validated them."""
    vendor_url: ClassVar[str | None] = None
    """The vendor's API when no base URL is configured (None: none, or a local server);
    a key from the config is sent only to its origin (opencrab.llm.key_origin)."""
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    """Bytes read from one reply before it is refused; the router sets `[llm] max_reply_bytes`."""

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        self.config = config or ProviderConfig()
        if name is not None:
            self.name = name
        try:
            self.options = self.facts.options.model_validate(self.config.options)
        except ValueError as exc:  # pydantic's ValidationError
            raise ProviderNotConfigured(
                f"llm.providers.{self.name}: {exc}", provider=self.name
            ) from exc
        self.refused: str | None = None
        """Set when the provider's server answered as an OpenCrab server: the reason."""

    @abstractmethod
    async def available_models(self) -> list[ModelInfo]:
        """The models this provider offers (fetched from the server where it lists them)."""

    @abstractmethod
    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply, with function calling when `request.tools` is set."""

    @abstractmethod
    def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as it is generated; the last chunk carries finish reason and usage."""

    def supports_function_calling(self) -> bool:
        """Whether the provider's models can call tools."""
        return True

    def supports_vision(self) -> bool:
        """Whether image inputs are accepted."""
        return True

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens when the provider knows it, else None."""
        return None

    @abstractmethod
    async def health_check(self) -> bool:
        """True when the provider answers (cheaply; never spends tokens)."""

    def is_configured(self) -> bool:
        """True when the provider has what it needs to be called (a key, a URL, a model)."""
        return True

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections."""

    # ---------------------------------------------------------------- helpers
    def api_key(self) -> str:
        """The configured API key, or ProviderNotConfigured naming what to set."""
        key = self.config.api_key
        if key is None or not key.get_secret_value():
            variable = self.facts.key_env
            raise ProviderNotConfigured(
                "no API key; "
                + (f"export {variable}, or " if variable else "")
                + f"set llm.providers.{self.name}.api_key",
                provider=self.name,
            )
        return key.get_secret_value()

    def http_hooks(self) -> dict[str, list[Callable[..., Any]]]:
        """httpx event hooks every HTTP client of a provider uses: they send this
        process's instance mark and refuse a server answering as OpenCrab (setting
        `refused`), so a provider pointed at OpenCrab's own `/v1` is never used, and
        stop reading a reply at `max_reply_bytes` (opencrab.llm.reply_cap)."""

        def refuse(reason: str) -> None:
            self.refused = reason

        hooks = event_hooks(self.name, refuse)
        hooks["response"].append(reply_cap_hook(self.name, lambda: self.max_reply_bytes))
        return hooks

    def timeout_for(self, request: ChatRequest) -> float:
        return request.timeout if request.timeout is not None else self.config.timeout_secs


def parse_arguments(raw: str | dict[str, Any] | None) -> tuple[Any, str | None]:
    """(arguments, raw text): parsed JSON when the model's text parses, else the text."""
    if raw is None:
        return {}, None
    if not isinstance(raw, str):
        return raw, None
    if not raw.strip():
        return {}, raw
    try:
        return json.loads(raw), raw
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return raw, raw


def arguments_json(arguments: Any) -> str:
    """Arguments as the JSON text OpenAI-style wire formats want."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)
