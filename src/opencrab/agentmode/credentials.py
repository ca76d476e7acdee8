"""The credentials a sub-agent's coding CLI gets: OpenCrab's own configured provider.

A sub-agent never uses a login of the user's own (its CLI runs with a HOME of its own).
It talks to the provider OpenCrab is configured with, with the key and base URL
OpenCrab's own calls use: the key entered on the dashboard's LLM settings page (stored
encrypted), or `[llm.providers.<name>]` in the config file (whose packaged default reads
the provider's key variable, `ProviderFacts.key_env`, from the environment),
with the same precedence and the same rule that a key goes only to the origin it was
given for (`LiveLlmSettings.effective_provider`). It is read when each task starts, so
a key entered while a session runs counts for the tasks that start after.

How each CLI is given it (`clis.prepare`):
- Claude Code, anthropic: ANTHROPIC_API_KEY (approved beforehand in its ~/.claude.json,
  so it never asks whether to use it) and ANTHROPIC_BASE_URL;
- Codex, openai: a model provider in its config.toml, the key in the variable it names;
- Gemini CLI, google: GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL, API-key sign-in chosen;
- OpenCode: `[llm] default_provider` when it is anthropic, openai, google or openrouter,
  else the first of those with a key: its opencode.json provider options, the key read
  from a variable (never written to the file).

The provider's `default_model`, when configured, is the model the CLI is asked to use.
A CLI whose provider has no usable key is refused before it starts, with what to set.

Example:
    credentials = SubAgentCredentials.open(settings, db)
    endpoint = credentials.endpoint("ClaudeCode")  # Endpoint(base_url, api_key, model, …)
"""

from __future__ import annotations

from dataclasses import dataclass

from opencrab.agentmode.clis import AgentType, Endpoint
from opencrab.config import Settings
from opencrab.config.models import ProviderConfig
from opencrab.errors import ValidationError
from opencrab.llm.live_settings import LiveLlmSettings
from opencrab.llm.registry import provider_facts
from opencrab.llm.router import LlmRouter
from opencrab.store import Database

CLI_PROVIDERS: dict[AgentType, tuple[str, ...]] = {
    "ClaudeCode": ("anthropic",),
    "Codex": ("openai",),
    "Gemini": ("google",),
    "OpenCode": ("anthropic", "openai", "google", "openrouter"),
}
"""The OpenCrab providers each coding CLI can talk to, in the order they are tried."""


@dataclass(frozen=True)
class Found:
    """A provider's configuration in effect, and why its key is not used (or None)."""

    name: str
    config: ProviderConfig
    problem: str | None

    @property
    def key(self) -> str:
        secret = self.config.api_key
        return secret.get_secret_value().strip() if secret is not None else ""


class SubAgentCredentials:
    """Endpoints for the coding CLIs from OpenCrab's LLM settings (config + dashboard)."""

    def __init__(self, live: LiveLlmSettings) -> None:
        self.live = live

    @classmethod
    def open(cls, settings: Settings, db: Database) -> SubAgentCredentials:
        """Credentials read from `settings` and the store, for a process with no running
        router of its own (the CLI); `opencrab up` passes its runtime's settings."""
        return cls(LiveLlmSettings(settings, db, LlmRouter(settings)))

    def providers_for(self, agent_type: AgentType) -> tuple[str, ...]:
        """The providers `agent_type` may use, the configured default provider first."""
        names = CLI_PROVIDERS.get(agent_type, ())
        default = self.live.settings.llm.default_provider
        if agent_type == "OpenCode" and default in names:
            return (default, *(n for n in names if n != default))
        return names

    def endpoint(self, agent_type: AgentType) -> Endpoint | None:
        """The endpoint the CLI talks to; None for a CLI that needs none (`other`);
        ValidationError naming what to set when its provider has no usable key."""
        names = self.providers_for(agent_type)
        if not names:
            return None
        found = [self._found(name) for name in names]
        usable = next((f for f in found if f.key and f.config.enabled is not False), None)
        if usable is None:
            raise ValidationError(_no_key(agent_type, found))
        return Endpoint(
            base_url=(usable.config.base_url or "").strip() or None,
            api_key=usable.key,
            model=usable.config.default_model or None,
            provider=usable.name,
        )

    def _found(self, name: str) -> Found:
        config, problem = self.live.effective_provider(name)
        return Found(name, config, problem)


def _no_key(agent_type: AgentType, found: list[Found]) -> str:
    """Why `agent_type` cannot start, and where to set the key (one sentence a form or
    a terminal shows as it is)."""
    reasons = []
    for f in found:
        if f.problem:
            reasons.append(f.problem)
        elif f.key and f.config.enabled is False:
            reasons.append(f"{f.name} is switched off on the dashboard's LLM page")
        else:
            facts = provider_facts().get(f.name)
            variable = facts.key_env if facts is not None else None
            reasons.append(
                f"enter the {f.name} key on the dashboard's LLM page, or set "
                f"[llm.providers.{f.name}] api_key in the config file"
                + (f" (by default read from {variable})" if variable else "")
            )
    names = found[0].name if len(found) == 1 else "one of " + ", ".join(f.name for f in found)
    return f"{agent_type} needs an API key for {names}: " + "; ".join(reasons)
