"""Which credentials each coding CLI gets, and how: OpenCrab's configured provider (the
key stored through the LLM settings, as the dashboard stores it, or the config file's),
written the way each CLI takes it, never into a file of its HOME. The real Claude Code
and Codex are driven in test_credentials_real_clis.py; Gemini CLI and OpenCode are
checked here at the level of the environment and configuration each one gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opencrab.agentmode import clis
from opencrab.agentmode.clis import AgentType, Endpoint, Launch
from opencrab.agentmode.credentials import SubAgentCredentials
from opencrab.config import Settings, load_settings
from opencrab.errors import ValidationError
from opencrab.llm.live_settings import LiveLlmSettings
from opencrab.llm.router import LlmRouter
from opencrab.store import Database

BASE = "http://127.0.0.1:9"
KEYS = {
    "anthropic": "sk-ant-stored-through-the-settings-1a2b3c4d",
    "openai": "sk-openai-stored-through-the-settings-5e6f",
    "google": "AIza-stored-through-the-settings-7a8b9c",
    "openrouter": "sk-or-stored-through-the-settings-0d1e",
}
URLS = {
    "anthropic": BASE,
    "openai": f"{BASE}/v1",
    "google": BASE,
    "openrouter": f"{BASE}/api/v1",
}


async def stored(settings: Settings, db: Database, *names: str) -> SubAgentCredentials:
    """Credentials after each provider's key and base URL were entered as the dashboard
    enters them (`PATCH /api/llm/providers/{name}` calls this method)."""
    live = LiveLlmSettings(settings, db, LlmRouter(settings))
    for name in names:
        await live.update_provider(
            name, {"api_key": KEYS[name], "base_url": URLS[name]}, actor="test"
        )
    return SubAgentCredentials(live)


def prepared(tmp_path: Path, agent_type: AgentType, endpoint: Endpoint | None) -> Launch:
    profile = clis.PROFILES[agent_type]
    return clis.prepare(
        profile,
        executable=profile.executable,
        home=tmp_path / "home",
        workdir=tmp_path / "work",
        signal_dir=tmp_path / "signals",
        endpoint=endpoint,
        prompt="do it",
    )


def files_holding(root: Path, secret: str) -> list[str]:
    return [p.name for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


async def test_gemini_cli_gets_the_stored_google_key_and_the_api_key_sign_in(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    credentials = await stored(settings, db, "google")
    endpoint = credentials.endpoint("Gemini")
    launch = prepared(tmp_path, "Gemini", endpoint)

    assert launch.env["GEMINI_API_KEY"] == KEYS["google"]
    assert launch.env["GOOGLE_GEMINI_BASE_URL"] == BASE  # as OpenCrab's google provider
    written = json.loads((launch.home / ".gemini" / "settings.json").read_text())
    assert written["security"]["auth"]["selectedType"] == "gemini-api-key"  # no sign-in menu
    assert not files_holding(launch.home, KEYS["google"])


async def test_opencode_gets_the_default_provider_with_the_key_from_a_variable(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    credentials = await stored(settings, db, "anthropic", "openai")
    assert settings.llm.default_provider == "openai"
    endpoint = credentials.endpoint("OpenCode")
    launch = prepared(tmp_path, "OpenCode", endpoint)

    config_file = launch.home / ".config" / "opencode" / "opencode.json"
    assert launch.env["XDG_CONFIG_HOME"] == str(launch.home / ".config")  # its own, not ours
    written = json.loads(config_file.read_text())
    # an OpenAI base URL of its own: OpenCrab's OpenAI-compatible provider (Chat Completions)
    provider = written["provider"]["opencrab"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    options = provider["options"]
    assert options == {"apiKey": "{env:OPENCRAB_OPENCODE_API_KEY}", "baseURL": f"{BASE}/v1"}
    assert launch.env["OPENCRAB_OPENCODE_API_KEY"] == KEYS["openai"]
    assert not files_holding(launch.home, KEYS["openai"])


async def test_opencode_on_anthropic_or_google_gets_the_version_path_its_sdk_expects(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    for name, path in (("anthropic", "/v1"), ("google", "/v1beta"), ("openrouter", "")):
        endpoint = Endpoint(URLS[name], KEYS[name], "m-1", provider=name)
        launch = prepared(tmp_path / name, "OpenCode", endpoint)
        written = json.loads((launch.home / ".config" / "opencode" / "opencode.json").read_text())
        assert written["provider"][name]["options"]["baseURL"] == URLS[name] + path
        assert written["model"] == f"{name}/m-1"


async def test_claude_code_and_codex_get_the_stored_keys_approved_and_out_of_files(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    credentials = await stored(settings, db, "anthropic", "openai")

    claude = prepared(tmp_path / "claude", "ClaudeCode", credentials.endpoint("ClaudeCode"))
    assert claude.env["ANTHROPIC_API_KEY"] == KEYS["anthropic"]
    assert claude.env["ANTHROPIC_BASE_URL"] == BASE
    state = json.loads((claude.home / ".claude.json").read_text())
    assert state["customApiKeyResponses"]["approved"] == [KEYS["anthropic"][-20:]]
    assert files_holding(claude.home, KEYS["anthropic"]) == []  # only its last 20 characters

    codex = prepared(tmp_path / "codex", "Codex", credentials.endpoint("Codex"))
    assert codex.env[clis.CODEX_KEY_VAR] == KEYS["openai"]
    config = (codex.home / ".codex" / "config.toml").read_text()
    assert f'base_url = "{BASE}/v1"' in config
    assert "shell_snapshot = false" in config  # no copy of its environment on disk
    assert not files_holding(codex.home, KEYS["openai"])


async def test_a_key_only_in_the_config_file_is_used_with_the_vendors_own_api(
    db: Database, tmp_path: Path
) -> None:
    config = tmp_path / "opencrab.toml"
    config.write_text(
        '[llm]\ndefault_provider = "anthropic"\n'
        '[llm.providers.anthropic]\napi_key = "sk-ant-config-file-key-0011"\n'
        'default_model = "claude-sonnet-4-5"\n',
        encoding="utf-8",
    )
    credentials = SubAgentCredentials.open(load_settings(config), db)

    endpoint = credentials.endpoint("ClaudeCode")
    assert endpoint == Endpoint(
        None, "sk-ant-config-file-key-0011", "claude-sonnet-4-5", "anthropic"
    )
    assert "sk-ant-config" not in repr(endpoint)  # never in a log line
    launch = prepared(tmp_path, "ClaudeCode", endpoint)
    assert "ANTHROPIC_BASE_URL" not in launch.env  # Claude Code's own default API
    assert launch.env["ANTHROPIC_MODEL"] == "claude-sonnet-4-5"
    opencode = credentials.endpoint("OpenCode")  # the default provider first
    assert opencode is not None
    assert opencode.provider == "anthropic"
    assert credentials.endpoint("Other") is None  # a program of the user's: nothing


async def test_a_cli_without_a_usable_key_is_refused_naming_where_to_set_it(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    credentials = await stored(settings, db)
    with pytest.raises(ValidationError) as refused:
        credentials.endpoint("Codex")
    assert "Codex needs an API key for openai" in str(refused.value)
    assert "dashboard's LLM page" in str(refused.value)
    assert "[llm.providers.openai] api_key" in str(refused.value)
    assert "OPENAI_API_KEY" in str(refused.value)

    await credentials.live.update_provider("anthropic", {"enabled": False}, actor="test")
    await credentials.live.update_provider("anthropic", {"api_key": KEYS["anthropic"]}, actor="t")
    with pytest.raises(ValidationError) as off:
        credentials.endpoint("ClaudeCode")
    assert "anthropic is switched off" in str(off.value)
