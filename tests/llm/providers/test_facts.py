"""Every built-in provider declares its own facts, and nothing else lists providers.

The facts (opencrab.config.providers.ProviderFacts) are what the config, the router, the
price book and the LLM settings read; a provider that inherits its parent's facts or
leaves one out would be configured, keyed or priced as another one.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from opencrab.config.models import ProviderConfig
from opencrab.config.provenance import default_text
from opencrab.config.providers import ProviderFacts, ProviderOptions, registered_providers
from opencrab.errors import ConfigError, ProviderNotConfigured
from opencrab.llm.base import LlmProvider
from opencrab.llm.pricing import PriceBook
from opencrab.llm.registry import build_provider
from opencrab.plugins import hookimpl, plugin_manager

BUILTINS = {
    name: entry
    for name, entry in registered_providers().items()
    if entry.cls.__module__.startswith("opencrab.llm.providers.")
}
PACKAGED = tomllib.loads(default_text())["llm"]["providers"]
COMMON = set(ProviderConfig.model_fields)


def test_the_builtins_are_registered_through_the_hook() -> None:
    assert set(BUILTINS) == {
        "openai",
        "anthropic",
        "google",
        "openrouter",
        "ollama",
        "llamacpp",
        "embedded",
    }


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_a_builtin_declares_every_fact_on_its_own_class(name: str) -> None:
    cls = BUILTINS[name].cls
    assert issubclass(cls, LlmProvider)
    assert cls.__dict__.get("name") == name
    facts = cls.__dict__.get("facts")
    assert isinstance(facts, ProviderFacts), f"{cls.__name__} declares no facts of its own"
    assert {f.name for f in fields(facts)} == {
        "key_env",
        "base_url",
        "local",
        "prices",
        "options",
        "libraries",
        "extra",
    }, "a new fact: declare it for every built-in and check it here"
    assert facts.prices, f"{name} declares no default price"
    assert issubclass(facts.options, ProviderOptions)
    assert not (facts.local and facts.key_env), "a local model takes no key variable"
    assert bool(facts.libraries) == bool(facts.extra), "a library comes with its extra"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_the_packaged_config_agrees_with_the_facts(name: str) -> None:
    facts = BUILTINS[name].facts
    table = PACKAGED.get(name, {})
    key = table.get("api_key")
    assert key == (f"${{{facts.key_env}}}" if facts.key_env else None)
    if "base_url" in table:
        assert facts.base_url
    own = set(table) - COMMON
    assert own <= set(facts.options.model_fields), f"{name}: {own} not in its options model"


def test_the_packaged_providers_are_registered() -> None:
    assert set(PACKAGED) <= set(BUILTINS)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_default_price_is_in_the_price_book(name: str) -> None:
    book = PriceBook.defaults()
    for price in BUILTINS[name].facts.prices:
        model = price.model.replace("*", "x")
        found = book.find(name, model)
        assert found is not None, (name, price.model)
        assert (found.input_price_per_1m, found.output_price_per_1m) == (
            price.input_per_1m,
            price.output_per_1m,
        )


def test_a_providers_own_settings_reach_it_as_its_options() -> None:
    provider = build_provider("openrouter", ProviderConfig(site_url="https://crab.example"))
    assert provider.options.model_dump()["site_url"] == "https://crab.example"


def test_no_module_keeps_a_list_of_providers() -> None:
    """The closed lists the facts replaced stay gone."""
    source = Path(__file__).parents[3] / "src" / "opencrab"
    gone = ("BUILTIN_PROVIDERS", "KEY_PROVIDERS", "URL_PROVIDERS", "LOCAL_PROVIDERS")
    found = [
        f"{path.relative_to(source)}: {name}"
        for path in source.rglob("*.py")
        for name in (*gone, "DEFAULT_PRICES")
        if name in path.read_text(encoding="utf-8")
    ]
    assert not found


def test_a_missing_key_names_the_providers_variable() -> None:
    told = r"export GOOGLE_API_KEY, or set llm\.providers\.google\.api_key"
    with pytest.raises(ProviderNotConfigured, match=told):
        build_provider("google", ProviderConfig()).api_key()


class Nameless:
    """Not a provider: it declares neither a name nor facts."""


class Factless(LlmProvider):
    name = "factless"


class OldStyle:
    @hookimpl
    def register_providers(self, register: Any) -> None:
        register("old", LlmProvider)


@pytest.mark.parametrize(
    ("registered", "told"),
    [
        (Nameless, "declares no `name`"),
        (Factless, "'factless' .* declares no ProviderFacts `facts`"),
        (OldStyle, r"give the provider class alone, register\(ProviderClass\)"),
    ],
)
def test_a_plugin_registering_something_else_is_a_clear_error(registered: type, told: str) -> None:
    if registered is OldStyle:
        plugin: object = OldStyle()
    else:

        class Plugin:
            @hookimpl
            def register_providers(self, register: Any) -> None:
                register(registered)

        plugin = Plugin()
    plugin_manager().register(plugin, name="bad-provider-test")
    try:
        with pytest.raises(ConfigError, match=told):
            registered_providers()
    finally:
        plugin_manager().unregister(name="bad-provider-test")
