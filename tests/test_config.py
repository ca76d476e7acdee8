"""Config: packaged defaults, layering, ${VAR} expansion and errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencrab.config import load_settings
from opencrab.config.models import ModelRef
from opencrab.config.provenance import (
    DEFAULT_SOURCE,
    effective_values,
    purpose_choices,
    purpose_model,
)
from opencrab.errors import ConfigError
from opencrab.llm.router import LlmRouter


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_packaged_defaults_have_every_seed_section() -> None:
    s = load_settings(env={})
    assert s.agent.heartbeat_interval_secs == 29
    assert s.agent.max_workspace_size_mb == 100
    assert (s.llm.default_provider, s.llm.default_model) == ("openai", "gpt-4o")
    assert s.llm.models.thinking is not None
    assert s.llm.models.thinking.model == "claude-opus-4.6"
    assert s.llm.models.embedding is not None
    assert s.llm.models.embedding.model == "text-embedding-3-large"
    assert s.llm.self_selection.enabled is True
    assert s.llm.fallback.chain == ["openai", "anthropic", "openrouter", "ollama"]
    assert set(s.llm.providers) == {
        "openai",
        "anthropic",
        "google",
        "openrouter",
        "ollama",
        "llamacpp",
    }
    assert s.llm.providers["openrouter"].app_name == "OpenCrab"
    assert s.llm.aliases["fast"].model == "gpt-5-mini"
    assert s.llm.aliases["free_general"].model == "meta-llama/llama-3.3-70b"
    assert set(s.llm.self_selection.allowed_aliases) <= set(s.llm.aliases)
    assert s.gateway.rest.port == 8080
    assert s.gateway.rest.host == "127.0.0.1"
    assert s.gateway.discord.enabled is False
    assert s.gateway.cli.enabled is True
    assert s.gateway.openai_compat.enabled is False
    assert s.dashboard.port == 3000


def test_data_dir_placeholder_resolves_against_cwd(tmp_path: Path) -> None:
    s = load_settings(env={}, cwd=tmp_path)
    assert s.data_dir == tmp_path / "data"
    assert s.database.path == str(tmp_path / "data" / "opencrab.db")
    assert s.database_url == f"sqlite:///{tmp_path / 'data' / 'opencrab.db'}"
    assert s.agent.workspace_path == str(tmp_path / "data" / "agents" / "{agent_id}" / "workspace")


def test_missing_keys_leave_providers_unconfigured_without_error() -> None:
    s = load_settings(env={})
    assert s.llm.providers["openai"].api_key is None
    assert s.gateway.discord.token is None


def test_layering_default_file_env_overrides(tmp_path: Path) -> None:
    file = write(
        tmp_path / "user.toml",
        '[gateway.rest]\nport = 9000\nhost = "::1"\n[llm]\ndefault_model = "from-file"\n',
    )
    env = {"OPENCRAB_GATEWAY__REST__PORT": "9100", "OPENCRAB_AGENT__MAX_WORKSPACE_SIZE_MB": "5"}
    s = load_settings(file, env=env)
    assert s.gateway.rest.port == 9100  # env beats file
    assert s.gateway.rest.host == "::1"  # file beats default
    assert s.llm.default_model == "from-file"
    assert s.agent.max_workspace_size_mb == 5
    assert s.agent.heartbeat_interval_secs == 29  # default survives
    s = load_settings(file, env=env, overrides={"gateway": {"rest": {"port": 9200}}})
    assert s.gateway.rest.port == 9200  # flags beat everything


def test_config_file_from_environment_variable(tmp_path: Path) -> None:
    file = write(tmp_path / "c.toml", "[gateway.rest]\nport = 3100\n")
    assert load_settings(env={"OPENCRAB_CONFIG": str(file)}).gateway.rest.port == 3100


def test_dashboard_keys_are_read_from_file_and_environment(tmp_path: Path) -> None:
    file = write(tmp_path / "c.toml", "[dashboard]\nport = 3100\n")
    assert load_settings(file, env={}).dashboard.port == 3100
    assert load_settings(env={"OPENCRAB_DASHBOARD__ENABLED": "false"}).dashboard.enabled is False
    with pytest.raises(ConfigError, match=r"dashboard\.port"):
        load_settings(write(tmp_path / "bad.toml", "[dashboard]\nport = 70000\n"), env={})


def test_env_values_are_typed(tmp_path: Path) -> None:
    env = {
        "OPENCRAB_GATEWAY__DISCORD__GUILD_IDS": "[1, 2]",
        "OPENCRAB_LLM__SELF_SELECTION__ENABLED": "false",
        "OPENCRAB_LLM__DEFAULT_MODEL": "gpt-5.2",
        "OPENCRAB_LLM__ALIASES__MINE": '{ provider = "ollama", model = "qwen3:8b" }',
        "OPENCRAB_HOME": str(tmp_path / "home"),
    }
    s = load_settings(env=env)
    assert s.gateway.discord.guild_ids == [1, 2]
    assert s.llm.self_selection.enabled is False
    assert s.llm.default_model == "gpt-5.2"
    assert s.llm.aliases["mine"].model == "qwen3:8b"
    assert s.data_dir == tmp_path / "home"


def test_variable_expansion_with_fallback_and_escape(tmp_path: Path) -> None:
    file = write(
        tmp_path / "c.toml",
        "[llm.providers.ollama]\n"
        'base_url = "http://${OLLAMA_HOST:-localhost}:11434"\n'
        'default_model = "$${literal}"\n'
        "[llm.providers.openai]\n"
        'api_key = "${MY_KEY}"\n',
    )
    s = load_settings(file, env={"MY_KEY": "sk-test"})
    assert s.llm.providers["ollama"].base_url == "http://localhost:11434"
    assert s.llm.providers["ollama"].default_model == "${literal}"
    key = s.llm.providers["openai"].api_key
    assert key is not None
    assert key.get_secret_value() == "sk-test"
    assert "sk-test" not in repr(s)  # secrets never show in reprs or logs
    s = load_settings(file, env={"MY_KEY": "k", "OLLAMA_HOST": "gpu-box"})
    assert s.llm.providers["ollama"].base_url == "http://gpu-box:11434"


def test_missing_variable_for_a_used_provider_is_an_error(tmp_path: Path) -> None:
    file = write(tmp_path / "c.toml", '[llm]\ndefault_provider = "anthropic"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(file, env={})
    message = str(err.value)
    assert "llm.providers.anthropic.api_key" in message
    assert "ANTHROPIC_API_KEY" in message
    assert "llm.default_provider" in message
    assert load_settings(file, env={"ANTHROPIC_API_KEY": "x"}).llm.default_provider == "anthropic"


@pytest.mark.parametrize(
    ("toml", "variable"),
    [
        ('[llm.models]\nthinking = { provider = "google", model = "gemini-3-pro" }\n', "GOOGLE"),
        ('[llm.fallback]\nchain = ["openrouter"]\n', "OPENROUTER_API_KEY"),
        ("[llm.providers.openai]\nenabled = true\n", "OPENAI_API_KEY"),
        ("[gateway.discord]\nenabled = true\n", "DISCORD_TOKEN"),
        ('[database]\nurl = "${DATABASE_URL}"\n', "DATABASE_URL"),
    ],
)
def test_every_kind_of_use_demands_its_variable(tmp_path: Path, toml: str, variable: str) -> None:
    file = write(tmp_path / "c.toml", toml)
    with pytest.raises(ConfigError, match=variable):
        load_settings(file, env={})


def test_bad_toml_names_file_and_position(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.toml", "[gateway.rest\nport = 1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(file, env={})
    assert str(file) in str(err.value)
    assert "line 1" in str(err.value)


def test_wrong_type_names_file_key_and_value(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.toml", '[gateway.rest]\nport = "eighty"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(file, env={})
    message = str(err.value)
    assert f"{file}: gateway.rest.port:" in message
    assert "'eighty'" in message


def test_out_of_range_port_from_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env={"OPENCRAB_GATEWAY__REST__PORT": "70000"})
    assert "environment OPENCRAB_GATEWAY__REST__PORT: gateway.rest.port" in str(err.value)


def test_unknown_section_and_key_are_errors(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.toml", "[nope]\na = 1\n[agent]\nheartbeat = 3\n")
    with pytest.raises(ConfigError) as err:
        load_settings(file, env={})
    message = str(err.value)
    assert f"{file}: nope: unknown section" in message
    assert f"{file}: agent.heartbeat: unknown key" in message


def test_unknown_provider_and_undefined_alias_are_errors(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.toml", '[llm.providers.opneai]\napi_key = "x"\n')
    with pytest.raises(ConfigError, match=r"llm\.providers\.opneai: unknown provider 'opneai'"):
        load_settings(file, env={})
    env = {"OPENCRAB_LLM__SELF_SELECTION__ALLOWED_ALIASES": '["fast", "turbo"]'}
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    assert "allowed_aliases[1]: alias 'turbo' is not defined" in str(err.value)


def test_a_providers_own_settings_are_checked_by_its_options_model(tmp_path: Path) -> None:
    """`[llm.providers.<name>]` takes the common keys and the provider's own (its facts'
    options model): OpenRouter's app_name is not OpenAI's, and a typo is named."""
    file = write(
        tmp_path / "p.toml",
        '[llm.providers.openai]\norganisation = "org-1"\napp_name = "crab"\n'
        '[llm.providers.ollama]\ntimeout_secs = 5\nkeep_alive = "5m"\n',
    )
    with pytest.raises(ConfigError) as err:
        load_settings(file, env={})
    message = str(err.value)
    assert f"{file}: llm.providers.openai.organisation: unknown key for this provider" in message
    assert f"{file}: llm.providers.openai.app_name: unknown key for this provider" in message
    assert f"{file}: llm.providers.ollama.keep_alive: unknown key for this provider" in message
    file = write(tmp_path / "ok.toml", '[llm.providers.openai]\norganization = "org-1"\n')
    assert load_settings(file, env={}).llm.providers["openai"].options == {"organization": "org-1"}


def test_fallback_chain_takes_providers_aliases_and_models(tmp_path: Path) -> None:
    chain = '["anthropic", "claude_fast", "google/gemini-3-flash"]'
    env = {"OPENCRAB_LLM__FALLBACK__CHAIN": chain, "ANTHROPIC_API_KEY": "a"}
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY is not set and provider 'google'"):
        load_settings(env=env)  # a provider/model entry uses its provider
    s = load_settings(env={**env, "GOOGLE_API_KEY": "g"})
    assert s.llm.fallback.chain == ["anthropic", "claude_fast", "google/gemini-3-flash"]
    env["OPENCRAB_LLM__FALLBACK__CHAIN"] = '["claude_fast", "nope/model"]'
    with pytest.raises(ConfigError, match=r"chain\[1\]: unknown provider 'nope'"):
        load_settings(env=env)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "absent.toml", env={})


# ------------------------------------------------------------------ provenance and precedence
def test_every_value_remembers_its_layer(tmp_path: Path) -> None:
    file = write(tmp_path / "user.toml", '[llm]\ndefault_model = "from-file"\n')
    env = {"OPENCRAB_GATEWAY__REST__HOST": "127.0.0.2", "OPENAI_API_KEY": "sk-live-secret"}
    s = load_settings(file, env=env, overrides={"gateway": {"rest": {"port": 3100}}})
    assert s.origin(("llm", "default_model")) == str(file)
    assert s.origin(("gateway", "rest", "host")) == "environment OPENCRAB_GATEWAY__REST__HOST"
    assert s.origin(("gateway", "rest", "port")) == "command line"
    assert s.origin(("llm", "default_provider")) == DEFAULT_SOURCE
    assert s.origin(("llm", "providers", "openai", "timeout_secs")) == DEFAULT_SOURCE
    kinds = {key: (kind, value) for key, value, kind, _ in effective_values(s)}
    assert kinds["llm.default_model"] == ("file", "from-file")
    assert kinds["gateway.rest.host"] == ("environment", "127.0.0.2")
    assert kinds["gateway.rest.port"] == ("flag", 3100)
    assert kinds["llm.default_provider"] == ("packaged", "openai")
    assert kinds["llm.models.thinking"] == (
        "packaged",
        {"provider": "anthropic", "model": "claude-opus-4.6"},
    )
    assert kinds["llm.providers.openai.api_key"] == ("packaged", "<redacted>")
    assert "sk-live-secret" not in repr(effective_values(s))


def test_database_passwords_and_tokens_are_redacted(tmp_path: Path) -> None:
    env = {
        "OPENCRAB_DATABASE__URL": "postgresql://crab:hunter2@db.example/opencrab",
        "DISCORD_TOKEN": "discord-secret",
    }
    shown = {key: value for key, value, _, _ in effective_values(load_settings(env=env))}
    assert shown["database.url"] == "postgresql://crab:***@db.example/opencrab"
    assert shown["gateway.discord.token"] == "<redacted>"
    assert "hunter2" not in repr(shown)
    assert "discord-secret" not in repr(shown)


@pytest.mark.parametrize(
    ("toml", "env", "expected"),
    [
        # nothing of the user's: the packaged per-purpose models
        ("", {}, {"thinking": "anthropic/claude-opus-4.6", "analysis": "openai/gpt-5-mini"}),
        # the user's default beats every packaged per-purpose model
        (
            '[llm]\ndefault_provider = "anthropic"\ndefault_model = "claude-haiku-4.5"\n',
            {"ANTHROPIC_API_KEY": "a"},
            {
                "thinking": "anthropic/claude-haiku-4.5",
                "tool_calling": "anthropic/claude-haiku-4.5",
            },
        ),
        # a per-purpose model the user set beats the user's default
        (
            '[llm]\ndefault_model = "gpt-5-mini"\n'
            '[llm.models]\nanalysis = { provider = "openai", model = "gpt-5.2-pro" }\n',
            {"OPENAI_API_KEY": "sk"},
            {
                "analysis": "openai/gpt-5.2-pro",
                "thinking": "openai/gpt-5-mini",
                "embedding": "openai/text-embedding-3-large",  # a chat model cannot embed
            },
        ),
        # the environment is the user's too
        ("", {"OPENCRAB_LLM__DEFAULT_MODEL": "gpt-4.1"}, {"conversation": "openai/gpt-4.1"}),
    ],
)
def test_model_precedence_per_purpose(
    tmp_path: Path, toml: str, env: dict[str, str], expected: dict[str, str]
) -> None:
    file = write(tmp_path / "user.toml", toml)
    s = load_settings(file, env=env)
    router = LlmRouter(s)
    chosen = purpose_choices(s)
    for purpose, model in expected.items():
        assert str(router.resolve(purpose=purpose)) == model
        assert chosen[purpose][0] == model


def test_model_precedence_follows_settings_changed_in_code(tmp_path: Path) -> None:
    """The per-purpose answer is remembered per settings object, never past a change."""
    s = load_settings(write(tmp_path / "user.toml", ""), env={"OPENAI_API_KEY": "sk"})
    packaged = ModelRef(provider="openai", model="gpt-5.2")
    assert purpose_model(s, "conversation") == packaged
    s.llm.default_model = "gpt-4.1"  # a default set in code is the user's: it wins
    assert purpose_model(s, "conversation") is None
    s.llm.models.conversation = ModelRef(provider="openai", model="gpt-5-mini")
    assert purpose_model(s, "conversation") == ModelRef(provider="openai", model="gpt-5-mini")
    s.llm.default_model = "gpt-4o"
    s.llm.models.conversation = packaged
    assert purpose_model(s, "conversation") == packaged
