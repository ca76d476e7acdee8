"""Built-in providers, registered through the same hook a plugin uses.

Each class declares its own facts (`ProviderFacts`); importing these modules imports no
vendor SDK (each imports its SDK when first used), so a missing optional SDK affects
only its provider, which the registry then reports as not installed
(opencrab.llm.registry.build_provider).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opencrab.llm.providers.anthropic import AnthropicProvider
from opencrab.llm.providers.embedded import EmbeddedProvider
from opencrab.llm.providers.google import GoogleProvider
from opencrab.llm.providers.llamacpp import LlamaCppProvider
from opencrab.llm.providers.ollama import OllamaProvider
from opencrab.llm.providers.openai import OpenAIProvider
from opencrab.llm.providers.openrouter import OpenRouterProvider
from opencrab.plugins import hookimpl


@hookimpl
def register_providers(register: Callable[[Any], None]) -> None:
    for provider in (
        OpenAIProvider,
        AnthropicProvider,
        GoogleProvider,
        OpenRouterProvider,
        OllamaProvider,
        LlamaCppProvider,
        EmbeddedProvider,
    ):
        register(provider)
